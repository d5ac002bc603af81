package responses

import (
	"path/filepath"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// The prompt caching markers of a Responses request reach Anthropic
// through the hub, on the blocks the client marked: a developer message,
// a text and an image part, a function call's output, a tool; and
// prompt_cache_retention becomes the request's own marker of an hour.
func TestCacheControlReachesAnthropic(t *testing.T) {
	x, err := newX(testTranslator(), translatortest.ReadFile(t, filepath.Join(requestDir, "cache_control.responses.json")), nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := anthropic.Chat{}.ChatRequest(x.ChatBody(), "claude-sonnet-4-5")
	if err != nil {
		t.Fatal(err)
	}
	body := gjson.ParseBytes(req.Body)
	for path, ttl := range map[string]string{
		"system.1":                    "1h", // the developer message, after the instructions
		"messages.0.content.0":        "",   // the long document
		"messages.0.content.1":        "",   // the image
		"messages.2.content.0":        "",   // the tool_result
		"tools.0":                     "1h",
		"cache_control":               "1h", // prompt_cache_retention 24h
		"messages.0.content.2.absent": "-",
	} {
		cc := body.Get(path + ".cache_control")
		if path == "cache_control" {
			cc = body.Get(path)
		}
		switch {
		case ttl == "-":
			if body.Get("messages.0.content.2.cache_control").Exists() {
				t.Errorf("an unmarked part is marked: %s", body.Get("messages.0.content.2").Raw)
			}
		case cc.Get("type").Str != "ephemeral" || cc.Get("ttl").Str != ttl:
			t.Errorf("%s: cache_control %s, want ttl %q\n%s", path, cc.Raw, ttl, req.Body)
		}
	}
	if body.Get("messages.2.content.0.type").Str != "tool_result" || body.Get("system.1.text").Str != "A long, stable project guide." {
		t.Fatalf("the request's shape changed:\n%s", req.Body)
	}
}

// A tool_search_output item's marker stays on the tool message it becomes,
// as a function call output's does.
func TestCacheControlOnToolSearchOutput(t *testing.T) {
	const body = `{"model":"m","input":[{"role":"user","content":"find"},
		{"type":"tool_search_call","call_id":"c0","execution":"client","arguments":{"query":"calendar"}},
		{"type":"tool_search_output","call_id":"c0","execution":"client","cache_control":{"type":"ephemeral"},"tools":[
			{"type":"function","name":"create_event","parameters":{"type":"object"}}]}],
		"tools":[{"type":"tool_search","execution":"client","parameters":{"type":"object"}}]}`
	x, err := newX(testTranslator(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := gjson.ParseBytes(x.ChatBody()).Get("messages.2")
	if msg.Get("role").Str != "tool" || msg.Get("cache_control.type").Str != "ephemeral" {
		t.Errorf("tool message = %s, want a tool message marked ephemeral", msg.Raw)
	}
}
