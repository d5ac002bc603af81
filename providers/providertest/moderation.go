package providertest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// moderationFormat is OpenAI's moderations API, POST /v1/moderations:
// {"input": a string, an array of strings, or an array of {"type":
// "text", "text"} and {"type": "image_url"} parts; "model" optional}.
// Every result has all of OpenAI's categories; a text is flagged in the
// categories whose trigger words (ModerationTriggers) it contains, with a
// score of 0.9 there and 0.001 elsewhere.
type moderationFormat struct{ modelInBody }

func (moderationFormat) name() string                     { return "openai_moderations" }
func (moderationFormat) route(r *http.Request) routing    { return postTo(r, "/v1/moderations") }
func (moderationFormat) headers(h http.Header, id string) { h.Set("X-Request-Id", "req_"+id) }
func (moderationFormat) authorized(r *http.Request, want string) bool {
	return keyOK(bearer(r), want)
}
func (moderationFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	openAIFormat{}.fail(w, r, f)
}

// moderationCategories are OpenAI's moderation categories, in its order.
var moderationCategories = []string{"harassment", "harassment/threatening", "sexual", "hate",
	"hate/threatening", "illicit", "illicit/violent", "self-harm/intent", "self-harm/instructions",
	"self-harm", "sexual/minors", "violence", "violence/graphic"}

// ModerationTriggers are the words that flag a text in the fake's
// moderation answers, by category.
var ModerationTriggers = map[string][]string{
	"harassment": {"idiot"},
	"hate":       {"hateful"},
	"violence":   {"kill", "attack"},
	"self-harm":  {"self-harm"},
	"illicit":    {"counterfeit"},
}

func (moderationFormat) serve(c *call) {
	if !validJSON(c.body) || !gjson.ParseBytes(c.body).IsObject() {
		openAIParamError(c.w, http.StatusBadRequest, "", "We could not parse the JSON body of your request.")
		return
	}
	var texts []string
	bad, param := "", ""
	gjson.ParseBytes(c.body).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if v.Type != gjson.String {
				bad, param = "model must be a string", "model"
			}
		case "input":
			texts, bad = moderationInputs(v)
			param = "input"
		default:
			bad, param = "Unrecognized request argument supplied: "+k.Str, k.Str
		}
		return bad == ""
	})
	if bad == "" && texts == nil {
		bad, param = "you must provide an input", "input"
	}
	if bad != "" {
		openAIParamError(c.w, http.StatusBadRequest, param, bad)
		return
	}
	if c.scripted() {
		return
	}
	model := gjson.GetBytes(c.body, "model").Str
	if model == "" {
		model = "omni-moderation-latest"
	}
	b := make([]byte, 0, 512*len(texts))
	b = append(b, `{"id":"modr-`...)
	b = append(b, c.id...)
	b = append(b, `","model":`...)
	b = appendString(b, model)
	b = append(b, `,"results":[`...)
	for i, t := range texts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendModerationResult(b, t)
	}
	b = append(b, `]}`...)
	writeJSON(c.w, http.StatusOK, b)
}

// moderationInputs reads the input field: a string, strings, or parts.
func moderationInputs(v gjson.Result) ([]string, string) {
	switch {
	case v.Type == gjson.String:
		return []string{v.Str}, ""
	case v.IsArray():
		texts := []string{}
		bad := ""
		v.ForEach(func(_, e gjson.Result) bool {
			switch {
			case e.Type == gjson.String:
				texts = append(texts, e.Str)
			case e.IsObject() && e.Get("type").Str == "text" && e.Get("text").Type == gjson.String:
				texts = append(texts, e.Get("text").Str)
			case e.IsObject() && e.Get("type").Str == "image_url":
				texts = append(texts, "")
			default:
				bad = "input must be a string, an array of strings, or an array of text and image_url parts"
			}
			return bad == ""
		})
		if len(texts) == 0 && bad == "" {
			bad = "input must not be empty"
		}
		return texts, bad
	}
	return nil, "input must be a string, an array of strings, or an array of text and image_url parts"
}

// appendModerationResult appends the result of one text.
func appendModerationResult(b []byte, text string) []byte {
	lower := strings.ToLower(text)
	hit := make(map[string]bool)
	for cat, words := range ModerationTriggers {
		for _, w := range words {
			if strings.Contains(lower, w) {
				hit[cat] = true
			}
		}
	}
	b = append(b, `{"flagged":`...)
	b = strconv.AppendBool(b, len(hit) > 0)
	b = append(b, `,"categories":{`...)
	for i, cat := range moderationCategories {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, cat)
		b = append(b, ':')
		b = strconv.AppendBool(b, hit[cat])
	}
	b = append(b, `},"category_scores":{`...)
	for i, cat := range moderationCategories {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, cat)
		if hit[cat] {
			b = append(b, `:0.9`...)
		} else {
			b = append(b, `:0.001`...)
		}
	}
	b = append(b, `},"category_applied_input_types":{`...)
	for i, cat := range moderationCategories {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, cat)
		b = append(b, `:["text"]`...)
	}
	return append(b, `}}`...)
}
