package guardrails

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/jsonw"
)

// webhook is a webhook guard's screener: it posts the texts to an outside
// service and reads its decision. The protocol (docs/guardrails.md):
//
//	POST <url>
//	{"guard": "screen", "direction": "request", "api": "chat",
//	 "model": "oai/gpt-4o", "key": "alice", "account": "acme",
//	 "texts": ["…", "…"]}
//
// answered 200 with one of
//
//	{"action": "allow"}
//	{"action": "block", "reason": "…"}
//	{"action": "mask", "texts": ["…", "…"]}   (as many texts, in order)
//
// Anything else — another status, a timeout, a body that is not one of
// these — is an error: the guard's on_error decides.
type webhook struct {
	url     string
	headers map[string]string
	timeout time.Duration
	client  *http.Client
}

func newWebhook(c *GuardConfig, timeout time.Duration, client *http.Client) *webhook {
	if client == nil {
		client = &http.Client{}
	}
	return &webhook{url: c.URL, headers: c.Headers, timeout: timeout, client: client}
}

// maxReason bounds the reason a service gives, as the client sees it.
const maxReason = 256

// Errors of screening services.
var (
	errMaskCount   = errors.New("the service masked a different number of texts than it was sent")
	errBadDecision = errors.New("the service's answer is not a decision")
)

func (h *webhook) screen(ctx context.Context, g *guard, in *input, texts []string) (screening, error) {
	if len(texts) == 0 {
		return screening{action: Allow}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	body := webhookBody(g.name, in, texts)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return screening{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		// The client's error quotes the URL, whose query may hold a
		// token: only what went wrong is kept.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return screening{}, fmt.Errorf("calling the screening service: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	// The answer holds at most the texts again, and a little more.
	limit := int64(2*len(body) + 64<<10)
	answer, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return screening{}, fmt.Errorf("reading the screening service's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return screening{}, fmt.Errorf("the screening service answered %d", resp.StatusCode)
	}
	if int64(len(answer)) > limit {
		return screening{}, errors.New("the screening service's answer is too large")
	}
	return parseDecision(answer)
}

// webhookBody is the JSON a webhook guard posts.
func webhookBody(guard string, in *input, texts []string) []byte {
	n := 160
	for _, t := range texts {
		n += len(t) + 8
	}
	w := jsonw.New(make([]byte, 0, n))
	o := w.Object()
	o.Str("guard", guard)
	o.Str("direction", in.dir.String())
	o.Str("api", in.api.String())
	s := in.scope
	if s == nil {
		s = &Scope{}
	}
	model := ""
	if len(s.Models) > 0 {
		model = s.Models[0]
	}
	o.Str("model", model)
	o.Str("key", s.Key)
	o.Str("account", s.Account)
	a := o.Array("texts")
	for _, t := range texts {
		a.Str(t)
	}
	a.End()
	o.End()
	b, _ := w.Finish() // straight-line writing: no misuse
	return b
}

// parseDecision reads a screening service's answer.
func parseDecision(b []byte) (screening, error) {
	if !gjson.ValidBytes(b) {
		return screening{}, errBadDecision
	}
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return screening{}, errBadDecision
	}
	switch action := root.Get("action"); action.Str {
	case "allow":
		return screening{action: Allow}, nil
	case "block":
		reason := root.Get("reason").Str
		if len(reason) > maxReason {
			reason = reason[:maxReason]
		}
		return screening{action: Block, reason: reason}, nil
	case "mask":
		texts := root.Get("texts")
		if !texts.IsArray() {
			return screening{}, errBadDecision
		}
		var out []string
		ok := true
		texts.ForEach(func(_, v gjson.Result) bool {
			ok = v.Type == gjson.String
			out = append(out, v.Str)
			return ok
		})
		if !ok {
			return screening{}, errBadDecision
		}
		return screening{action: Mask, texts: out}, nil
	}
	return screening{}, errBadDecision
}
