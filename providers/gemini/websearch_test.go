package gemini

import (
	"testing"

	"github.com/tidwall/gjson"
)

// TestWebSearchOptions checks that web_search_options becomes Grounding
// with Google Search, beside the function declarations or alone.
func TestWebSearchOptions(t *testing.T) {
	for _, tc := range []struct{ name, tools, want string }{
		{"with functions", `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`,
			`[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"object"}}]},{"googleSearch":{}}]`},
		{"alone", ``, `[{"googleSearch":{}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"news?"}],"web_search_options":{"search_context_size":"high"}` + tc.tools + `}`
			req, err := testChat().ChatRequest([]byte(body), "gemini-2.5-flash")
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(req.Body, "tools").Raw; got != tc.want {
				t.Errorf("tools = %s, want %s", got, tc.want)
			}
		})
	}
}
