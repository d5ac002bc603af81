package providertest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestSchemaInstance(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"object", `{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"},"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name"]}`,
			`{"name":"echo: hi there","n":3,"ok":true,"tags":["echo: hi there"]}`},
		{"open object", `{"type":"object"}`, `{"text":"echo: hi there"}`},
		{"no schema (json_object)", ``, `{"text":"echo: hi there"}`},
		{"enum and nullable", `{"type":"object","properties":{"mood":{"enum":["calm","loud"]},"note":{"type":["string","null"]}}}`,
			`{"mood":"calm","note":"echo: hi there"}`},
		{"refs and anyOf", `{"$defs":{"P":{"type":"object","properties":{"x":{"type":"number"}}}},"type":"object","properties":{"p":{"$ref":"#/$defs/P"},"q":{"anyOf":[{"type":"null"},{"type":"string"}]}}}`,
			`{"p":{"x":3},"q":"echo: hi there"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(SchemaInstance(tc.schema, "echo: hi there"))
			if got != tc.want || !json.Valid([]byte(got)) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestOpenAIStructuredOutput: with response_format the answer is a JSON
// instance of the schema, streamed or not.
func TestOpenAIStructuredOutput(t *testing.T) {
	s := Start(t, Options{})
	rf := `"response_format":{"type":"json_schema","json_schema":{"name":"r","strict":true,"schema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}}}`
	_, got := Send(t, http.MethodPost, s.URL+"/v1/chat/completions", `{"model":"m",`+rf+`,"messages":[{"role":"user","content":"hi you"}]}`, "Authorization", "Bearer k")
	if c := gjson.Get(got, "choices.0.message.content").Str; c != `{"answer":"echo: hi you"}` {
		t.Errorf("content %q", c)
	}
	_, got = Send(t, http.MethodPost, s.URL+"/v1/chat/completions", `{"model":"m","stream":true,"response_format":{"type":"json_object"},"messages":[{"role":"user","content":"hi you"}]}`, "Authorization", "Bearer k")
	var text string
	for _, ev := range gjson.Parse("[" + joinData(got) + "]").Array() {
		text += ev.Get("choices.0.delta.content").Str
	}
	if text != `{"text":"echo: hi you"}` {
		t.Errorf("streamed %q", text)
	}
}

// joinData joins an SSE stream's JSON data lines with commas.
func joinData(stream string) string {
	var out []byte
	for _, line := range strings.Split(stream, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
			if len(out) > 0 {
				out = append(out, ',')
			}
			out = append(out, d...)
		}
	}
	return string(out)
}
