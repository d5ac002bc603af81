package guardrails

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// A Moderator asks a provider's moderation endpoint about texts. The host
// implements it over the provider's upstream (its reverse_proxy), so the
// call carries the provider's credentials and goes where its other calls
// go: ModerationRequest and ParseModeration are the wire format of
// OpenAI's POST /v1/moderations.
type Moderator interface {
	Moderate(ctx context.Context, provider, model string, texts []string) (Moderation, error)
}

// Moderation is a moderation endpoint's verdict on a set of texts.
type Moderation struct {
	Flagged    bool
	Categories []string // the categories flagged, in any text
}

// moderation is a moderation guard's screener.
type moderation struct {
	m          Moderator
	provider   string
	model      string
	categories map[string]bool // nil: any flag blocks
	timeout    time.Duration
}

func (m *moderation) screen(ctx context.Context, _ *guard, _ *input, texts []string) (screening, error) {
	if len(texts) == 0 {
		return screening{action: Allow}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	v, err := m.m.Moderate(ctx, m.provider, m.model, texts)
	if err != nil {
		return screening{}, err
	}
	flagged := v.Flagged
	if m.categories != nil {
		flagged = slices.ContainsFunc(v.Categories, func(c string) bool { return m.categories[c] })
	}
	if !flagged {
		return screening{action: Allow, found: v.Categories}, nil
	}
	reason := "flagged by moderation"
	if len(v.Categories) > 0 {
		reason += " (" + joinCategories(v.Categories) + ")"
	}
	return screening{action: Block, reason: reason, found: v.Categories}, nil
}

// joinCategories lists categories, at most a few.
func joinCategories(cs []string) string {
	s := ""
	for i, c := range cs {
		if i == 4 {
			return s + ", …"
		}
		if i > 0 {
			s += ", "
		}
		s += c
	}
	return s
}

// ModerationRequest is the body of a POST /v1/moderations in OpenAI's
// shape: {"input": [texts…]} and the model, when given.
func ModerationRequest(model string, texts []string) []byte {
	n := 32
	for _, t := range texts {
		n += len(t) + 4
	}
	w := jsonw.New(make([]byte, 0, n))
	o := w.Object()
	if model != "" {
		o.Str("model", model)
	}
	a := o.Array("input")
	for _, t := range texts {
		a.Str(t)
	}
	a.End()
	o.End()
	b, _ := w.Finish() // straight-line writing: no misuse
	return b
}

// errBadModeration is the error of a moderation answer that is not one.
var errBadModeration = errors.New("the moderation answer has no results")

// ParseModeration reads an answer of POST /v1/moderations in OpenAI's
// shape, {"results": [{"flagged": …, "categories": {…}}, …]}: flagged if
// any result is, with the categories true in any result, in the order
// first seen.
func ParseModeration(body []byte) (Moderation, error) {
	if !gjson.ValidBytes(body) {
		return Moderation{}, errBadModeration
	}
	results := gjson.GetBytes(body, "results")
	if !results.IsArray() || len(results.Array()) == 0 {
		return Moderation{}, errBadModeration
	}
	var v Moderation
	bad := false
	results.ForEach(func(_, r gjson.Result) bool {
		f := r.Get("flagged")
		if f.Type != gjson.True && f.Type != gjson.False {
			bad = true
			return false
		}
		v.Flagged = v.Flagged || f.Type == gjson.True
		r.Get("categories").ForEach(func(k, c gjson.Result) bool {
			if c.Type == gjson.True && !slices.Contains(v.Categories, k.Str) {
				v.Categories = append(v.Categories, k.Str)
			}
			return true
		})
		return true
	})
	if bad {
		return Moderation{}, errBadModeration
	}
	return v, nil
}

// noModerator stands in for the host's Moderator when a configuration is
// only validated.
type noModerator struct{}

func (noModerator) Moderate(context.Context, string, string, []string) (Moderation, error) {
	return Moderation{}, errNoModerator
}
