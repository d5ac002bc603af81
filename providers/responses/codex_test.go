package responses

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// codexItem is what Codex CLI deserialises from response.output_item.done
// (codex-rs protocol ResponseItem, serde tag "type"): the fields each
// variant requires. A field it requires that is missing, or of the wrong
// type, makes Codex drop the item.
type codexItem struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Summary []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent *string `json:"encrypted_content"`
	Name             string  `json:"name"`
	Arguments        string  `json:"arguments"`
	CallID           string  `json:"call_id"`
	Input            string  `json:"input"`
}

// codexRequires checks what Codex's serde types require of an item.
func codexRequires(t *testing.T, raw string) codexItem {
	t.Helper()
	var it codexItem
	if err := json.Unmarshal([]byte(raw), &it); err != nil {
		t.Fatalf("Codex cannot read %s: %v", raw, err)
	}
	v := gjson.Parse(raw)
	need := map[string][]string{
		"message":          {"role", "content"},
		"reasoning":        {"summary"},
		"function_call":    {"name", "arguments", "call_id"},
		"custom_tool_call": {"call_id", "name", "input"},
	}[it.Type]
	if need == nil {
		t.Fatalf("Codex does not know item type %q", it.Type)
	}
	for _, k := range need {
		if !v.Get(k).Exists() || v.Get(k).Type == gjson.Null {
			t.Fatalf("a %s item lacks %s, which Codex requires: %s", it.Type, k, raw)
		}
	}
	for _, c := range it.Content {
		if c.Type != "output_text" && c.Type != "refusal" {
			t.Fatalf("message content of type %q", c.Type)
		}
	}
	return it
}

// TestCodex checks what Codex CLI relies on: a Codex CLI request (a second
// turn, replaying its history statelessly: store false, reasoning with
// encrypted_content, a shell call and its output) translates into a hub
// request with its function and custom tools, and the streamed answer
// (reasoning with a signed thinking block, text, and an apply_patch call)
// gives Codex every event and item it needs; Codex's third turn, which
// sends that output back, restores the thinking block.
func TestCodex(t *testing.T) {
	request, hub, _ := readTranscript(t, filepath.Join(sseDir, "codex.txt"))

	// The request.
	info, err := Validate(request)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Stream || info.Store || info.PreviousResponseID != "" {
		t.Errorf("Info = %+v, want a stream, not stored", info)
	}
	x := newExchange(t, request)
	chat := x.ChatBody()
	if _, err := providers.ValidateChat(chat); err != nil {
		t.Fatal(err)
	}
	c := gjson.ParseBytes(chat)
	for path, want := range map[string]string{
		"messages.0.role":                        "system",
		"messages.1.role":                        "developer",
		"messages.4.thinking_blocks.0.signature": "EpYBCkYIBRgCKkB0c2lnbmF0dXJl",
		"messages.4.tool_calls.0.id":             "toolu_01ls",
		"messages.5.tool_call_id":                "toolu_01ls",
		"tools.2.function.name":                  "apply_patch",
		"tools.2.function.parameters.required.0": CustomInputParam,
		"tool_choice":                            "auto",
		"parallel_tool_calls":                    "false",
		"reasoning_effort":                       "medium",
		"verbosity":                              "medium",
		"prompt_cache_key":                       "0199a1f2-7c3e-7d40-9b2a-5f1e2d3c4b5a",
		"stream_options.include_usage":           "true",
	} {
		if got := c.Get(path).String(); got != want {
			t.Errorf("hub %s = %q, want %q", path, got, want)
		}
	}
	if d := c.Get("tools.2.function.description").Str; !strings.Contains(d, "*** Begin Patch") || !strings.Contains(d, "Lark grammar") {
		t.Errorf("the apply_patch function's description lacks its grammar: %q", d)
	}
	if c.Get("store").Exists() || c.Get("include").Exists() {
		t.Error("store or include reached the hub request")
	}

	// The stream.
	out := translateStream(x, hub, nil)
	events, final := checkEvents(t, out)
	seen := map[string]int{}
	var items []codexItem
	var itemRaws []string
	for _, ev := range events {
		seen[ev.name]++
		v := gjson.ParseBytes(ev.data)
		switch ev.name {
		case "response.created":
			if v.Get("response.id").Str == "" {
				t.Error("response.created without response.id")
			}
		case "response.output_item.done":
			items = append(items, codexRequires(t, v.Get("item").Raw))
			itemRaws = append(itemRaws, v.Get("item").Raw)
		case "response.reasoning_summary_text.delta", "response.reasoning_summary_part.added":
			if !v.Get("summary_index").Exists() {
				t.Errorf("%s without summary_index", ev.name)
			}
		case "response.completed":
			if v.Get("response.id").Str != x.ID() {
				t.Error("response.completed without the response id")
			}
			u := v.Get("response.usage")
			for path, want := range map[string]int64{"input_tokens": 4210, "input_tokens_details.cached_tokens": 3968,
				"output_tokens": 96, "output_tokens_details.reasoning_tokens": 31, "total_tokens": 4306} {
				if got := u.Get(path).Int(); got != want || !u.Get(path).Exists() {
					t.Errorf("usage %s = %d, want %d", path, got, want)
				}
			}
		}
	}
	for _, typ := range []string{"response.created", "response.output_item.added", "response.output_item.done",
		"response.output_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_summary_part.added",
		"response.custom_tool_call_input.delta", "response.completed"} {
		if seen[typ] == 0 {
			t.Errorf("no %s event", typ)
		}
	}
	if final.Status != "completed" {
		t.Fatalf("status %s", final.Status)
	}
	if len(items) != 3 || items[0].Type != "reasoning" || items[1].Type != "message" || items[2].Type != "custom_tool_call" {
		t.Fatalf("items %+v", items)
	}
	if items[0].EncryptedContent == nil || !strings.HasPrefix(*items[0].EncryptedContent, encryptedPrefix) {
		t.Error("the reasoning item lacks encrypted_content, which include asked for")
	}
	patch := "*** Begin Patch\n*** Update File: README.md\n@@\n-Teh project\n+The project\n*** End Patch\n" //nolint:misspell // the typo the patch fixes
	if it := items[2]; it.Name != "apply_patch" || it.CallID != "toolu_01patch" || it.Input != patch {
		t.Errorf("apply_patch call %+v", it)
	}
	if x.Record() != nil {
		t.Error("store false left a record")
	}

	// Codex's next turn sends the output back, without ids, with the
	// patch's output.
	var input []string
	gjson.ParseBytes(request).Get("input").ForEach(func(_, it gjson.Result) bool {
		input = append(input, it.Raw)
		return true
	})
	for _, raw := range itemRaws {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "id")
		b, _ := json.Marshal(m)
		input = append(input, string(b))
	}
	input = append(input, `{"type":"custom_tool_call_output","call_id":"toolu_01patch","output":"Success. Updated the following files:\nM README.md\n"}`)
	next := strings.Replace(string(request), gjson.GetBytes(request, "input").Raw, "["+strings.Join(input, ",")+"]", 1)
	y := newExchange(t, []byte(next))
	msgs := gjson.GetBytes(y.ChatBody(), "messages").Array()
	if _, err := providers.ValidateChat(y.ChatBody()); err != nil {
		t.Fatal(err)
	}
	last := msgs[len(msgs)-2]
	if last.Get("role").Str != "assistant" || last.Get("content").Str != "Fixing the typo in README.md." ||
		last.Get("thinking_blocks.0.signature").Str != "EpcBCkYIBRgCKkBwYXRjaA" ||
		last.Get("tool_calls.0.function.name").Str != "apply_patch" ||
		gjson.Get(last.Get("tool_calls.0.function.arguments").Str, CustomInputParam).Str != patch {
		t.Errorf("the replayed turn = %s", last.Raw)
	}
	if tool := msgs[len(msgs)-1]; tool.Get("role").Str != "tool" || tool.Get("tool_call_id").Str != "toolu_01patch" {
		t.Errorf("the patch's output = %s", tool.Raw)
	}
}

// TestCodexFailure checks the failure Codex reads: a rate limit in the
// middle of the stream ends it with response.failed whose error code is
// rate_limit_exceeded and whose message keeps the provider's "try again
// in", from which Codex takes its delay.
func TestCodexFailure(t *testing.T) {
	request, hub, _ := readTranscript(t, filepath.Join(sseDir, "error_midstream.txt"))
	events, final := checkEvents(t, translateStream(newExchange(t, request), hub, nil))
	if events[len(events)-1].name != "response.failed" || final.Error.Code != "rate_limit_exceeded" ||
		!strings.Contains(final.Error.Message, "try again in 20s") {
		t.Errorf("final %s: %+v", events[len(events)-1].name, final.Error)
	}
}
