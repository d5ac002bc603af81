package responses

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/sse"
)

// codexDir holds requests Codex CLI 0.171.0 sent, recorded through the
// gateway's fake provider (long texts clipped): <name>.responses.json,
// and the hub request each becomes, <name>.chat.json.
const codexDir = "testdata/codex-0.171.0"

// TestCodexRequests translates what Codex sends today into hub requests
// that pass the hub's validation: its namespace (sub-agent tools),
// client-run tool_search, custom apply_patch tool and web search among
// them, and the items it replays (a namespaced function call, a
// tool_search call and its output, a custom tool call).
func TestCodexRequests(t *testing.T) {
	translatortest.Golden(t, codexDir, ".responses.json", ".chat.json", func(t *testing.T, name string, body []byte) []byte {
		x, err := newX(testTranslator(), body, nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if _, err := providers.ValidateChat(x.ChatBody()); err != nil {
			t.Fatalf("the hub request does not pass ValidateChat: %v", err)
		}
		// Codex's web search is of OpenAI's cache (external_web_access
		// false): no provider has that, so it is dropped.
		if got := x.Dropped(); !slices.Equal(got, []string{"web_search"}) {
			t.Errorf("Dropped = %q, want [web_search]", got)
		}
		return x.ChatBody()
	})
}

// TestNamespaceTools checks that a namespace's functions reach the hub
// flattened as <namespace>__<name>, with the namespace's description, and
// that a call of one comes back, answered or streamed, as a function_call
// with its own name and its namespace; and that a replayed call keeps it.
func TestNamespaceTools(t *testing.T) {
	const body = `{"model":"m","input":[{"role":"user","content":"hi"},
		{"type":"function_call","call_id":"c0","namespace":"collaboration","name":"list_agents","arguments":"{}"},
		{"type":"function_call_output","call_id":"c0","output":"none"}],
		"tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"}},
		{"type":"namespace","name":"collaboration","description":"Sub-agents.","tools":[
			{"type":"function","name":"spawn_agent","description":"Spawns one.","parameters":{"type":"object"}},
			{"type":"function","name":"list_agents","parameters":{"type":"object"}}]}]}`
	x, err := newX(testTranslator(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	chat := gjson.ParseBytes(x.ChatBody())
	var names []string
	chat.Get("tools.#.function.name").ForEach(func(_, n gjson.Result) bool {
		names = append(names, n.Str)
		return true
	})
	if want := []string{"exec_command", "collaboration__spawn_agent", "collaboration__list_agents"}; !slices.Equal(names, want) {
		t.Errorf("hub tools = %q, want %q", names, want)
	}
	if d := chat.Get("tools.1.function.description").Str; d != "Sub-agents.\n\nSpawns one." {
		t.Errorf("description = %q", d)
	}
	if n := chat.Get("messages.1.tool_calls.0.function.name").Str; n != "collaboration__list_agents" {
		t.Errorf("replayed call's hub name = %q, want collaboration__list_agents", n)
	}

	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"collaboration__spawn_agent","arguments":"{\"task\":\"x\"}"}}]}}],
		"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	out, err := x.Response([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	item := gjson.GetBytes(out, "output.0")
	if item.Get("type").Str != "function_call" || item.Get("name").Str != "spawn_agent" || item.Get("namespace").Str != "collaboration" {
		t.Errorf("answer's item = %s", item.Raw)
	}

	x, _ = newX(testTranslator(), []byte(strings.Replace(body, `"model":"m"`, `"model":"m","stream":true`, 1)), nil)
	events := streamHub(t, x, `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"collaboration__spawn_agent","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	done := lastEvent(t, events, "response.output_item.done")
	if it := done.Get("item"); it.Get("name").Str != "spawn_agent" || it.Get("namespace").Str != "collaboration" || it.Get("arguments").Str != "{}" {
		t.Errorf("streamed item = %s", it.Raw)
	}
}

// TestToolSearch checks the client-run tool_search: a function for the
// hub, its calls tool_search_call items whose arguments are an object,
// and a replayed tool_search_output that makes the tools it found
// callable (a namespace's flattened).
func TestToolSearch(t *testing.T) {
	const body = `{"model":"m","input":[{"role":"user","content":"find"},
		{"type":"tool_search_call","call_id":"c0","execution":"client","arguments":{"query":"calendar"}},
		{"type":"tool_search_output","call_id":"c0","execution":"client","tools":[
			{"type":"function","name":"create_event","description":"Creates an event.","parameters":{"type":"object"}},
			{"type":"namespace","name":"mail","description":"Mail.","tools":[{"type":"function","name":"send","parameters":{"type":"object"}}]}]}],
		"tools":[{"type":"tool_search","execution":"client","description":"Finds tools.","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}]}`
	x, err := newX(testTranslator(), []byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	chat := gjson.ParseBytes(x.ChatBody())
	var names []string
	chat.Get("tools.#.function.name").ForEach(func(_, n gjson.Result) bool {
		names = append(names, n.Str)
		return true
	})
	if want := []string{"tool_search", "create_event", "mail__send"}; !slices.Equal(names, want) {
		t.Errorf("hub tools = %q, want %q", names, want)
	}
	call := chat.Get("messages.1.tool_calls.0.function")
	if call.Get("name").Str != "tool_search" || call.Get("arguments").Str != `{"query":"calendar"}` {
		t.Errorf("replayed search call = %s", call.Raw)
	}
	if out := chat.Get("messages.2.content").Str; !strings.Contains(out, `"name":"mail__send"`) {
		t.Errorf("search output = %s", out)
	}
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"tool_search","arguments":"{\"query\":\"mail\",\"limit\":2}"}},
		{"id":"call_2","type":"function","function":{"name":"mail__send","arguments":"{}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	out, err := x.Response([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	search := gjson.GetBytes(out, "output.0")
	if search.Get("type").Str != "tool_search_call" || search.Get("execution").Str != "client" || search.Get("call_id").Str != "call_1" ||
		search.Get("arguments.query").Str != "mail" || search.Get("arguments.limit").Int() != 2 {
		t.Errorf("search item = %s", search.Raw)
	}
	if it := gjson.GetBytes(out, "output.1"); it.Get("name").Str != "send" || it.Get("namespace").Str != "mail" {
		t.Errorf("found tool's call = %s", it.Raw)
	}
}

// TestBuiltinToolPolicy checks what becomes of built-in tools: a live web
// search maps to the hub's web_search_options; the rest, and a search of
// OpenAI's cache, are dropped (and named) or refused, per the policy.
func TestBuiltinToolPolicy(t *testing.T) {
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	tests := []struct {
		name, tools string
		search      bool     // web_search_options in the hub request
		dropped     []string // under BuiltinDrop
		param       string   // under BuiltinRefuse: the 400's param ("": no error)
	}{
		{"live web search", `[{"type":"web_search","search_context_size":"low","user_location":{"type":"approximate","country":"FR"}}]`, true, nil, ""},
		{"web search preview", `[{"type":"web_search_preview"}]`, true, nil, ""},
		{"cached web search", `[` + fn + `,{"type":"web_search","external_web_access":false}]`, false, []string{"web_search"}, "tools[1].type"},
		{"file search", `[` + fn + `,{"type":"file_search","vector_store_ids":["v"]}]`, false, []string{"file_search"}, "tools[1].type"},
		{"several", `[{"type":"image_generation"},{"type":"code_interpreter","container":{"type":"auto"}},{"type":"image_generation"},{"type":"local_shell"},{"type":"computer_use_preview"},{"type":"tool_search"}]`,
			false, []string{"image_generation", "code_interpreter", "local_shell", "computer_use_preview", "tool_search"}, "tools[0].type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"m","input":"a","tools":` + tt.tools + `}`
			x, err := newX(testTranslator(), []byte(body), nil)
			if err != nil {
				t.Fatal(err)
			}
			ws := gjson.GetBytes(x.ChatBody(), "web_search_options")
			if ws.Exists() != tt.search {
				t.Errorf("web_search_options = %s", ws.Raw)
			}
			if tt.search && strings.Contains(tt.tools, "FR") &&
				(ws.Get("search_context_size").Str != "low" || ws.Get("user_location.approximate.country").Str != "FR") {
				t.Errorf("web_search_options = %s", ws.Raw)
			}
			if !slices.Equal(x.Dropped(), tt.dropped) {
				t.Errorf("Dropped = %q, want %q", x.Dropped(), tt.dropped)
			}
			if _, err := providers.ValidateChat(x.ChatBody()); err != nil {
				t.Errorf("hub request: %v", err)
			}

			refuse := testTranslator()
			refuse.BuiltinTools = BuiltinRefuse
			_, err = newX(refuse, []byte(body), nil)
			var pe *providers.Error
			switch {
			case tt.param == "" && err != nil:
				t.Errorf("refuse: %v", err)
			case tt.param != "" && (!errors.As(err, &pe) || pe.Status != 400 || pe.Code != "unsupported_parameter" || pe.Param != tt.param):
				t.Errorf("refuse: error = %v, want 400 unsupported_parameter %s", err, tt.param)
			}
		})
	}
}

// searchless is a chat translator that, like a provider without a web
// search, refuses web_search_options, and records what it was given.
type searchless struct {
	providers.Chat
	got []byte
}

func (s *searchless) ChatRequest(body []byte, model string) (providers.Request, error) {
	s.got = body
	if gjson.GetBytes(body, "web_search_options").Exists() {
		return providers.Request{}, providers.UnsupportedBecause("web_search_options", "web_search_options is not supported by provider type x")
	}
	return providers.Request{Body: body}, nil
}

// TestWebSearchWithoutProvider checks a live web search sent to a provider
// that has none: dropped and named under BuiltinDrop, a 400 naming the
// client's tool under BuiltinRefuse.
func TestWebSearchWithoutProvider(t *testing.T) {
	body := []byte(`{"model":"m","input":"a","tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`)
	x, err := newX(testTranslator(), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &searchless{}
	if _, err := x.ChatRequest(c, "m"); err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(c.got, "web_search_options").Exists() || !slices.Equal(x.Dropped(), []string{"web_search"}) {
		t.Errorf("sent %s, dropped %q", c.got, x.Dropped())
	}
	refuse := testTranslator()
	refuse.BuiltinTools = BuiltinRefuse
	x, err = newX(refuse, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.ChatRequest(&searchless{}, "m")
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Param != "tools[1].type" || pe.Code != "unsupported_parameter" {
		t.Errorf("refuse: %v", err)
	}
}

// streamHub streams the hub chunks (and data: [DONE]) through x and
// returns the Responses events.
func streamHub(t *testing.T, x *Exchange, chunks ...string) []byte {
	t.Helper()
	var hub []byte
	for _, c := range chunks {
		hub = append(append(append(hub, "data: "...), c...), "\n\n"...)
	}
	hub = append(hub, "data: [DONE]\n\n"...)
	out := translateStream(x, hub, nil)
	checkEvents(t, out)
	return out
}

// lastEvent returns the data of the last event of type typ in events.
func lastEvent(t *testing.T, events []byte, typ string) gjson.Result {
	t.Helper()
	var last gjson.Result
	for rest := events; ; {
		ev, r, ok := sse.Cut(rest)
		if !ok {
			break
		}
		rest = r
		if _, data := sse.Fields(ev); gjson.GetBytes(data, "type").Str == typ {
			last = gjson.ParseBytes(data)
		}
	}
	if !last.Exists() {
		t.Fatalf("no %s event in\n%s", typ, events)
	}
	return last
}
