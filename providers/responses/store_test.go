package responses

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// decodeItemList decodes an input_items answer with openai-go and checks
// every required field.
func decodeItemList(t *testing.T, data []byte) responses.ResponseItemList {
	t.Helper()
	var l responses.ResponseItemList
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("openai-go cannot decode the list: %v\n%s", err, data)
	}
	if p := requiredProblems(l); len(p) > 0 {
		t.Fatalf("the list does not satisfy openai-go's ResponseItemList:\n  %s\n%s", strings.Join(p, "\n  "), data)
	}
	return l
}

func ids(l responses.ResponseItemList) []string {
	var s []string
	for _, it := range l.Data {
		s = append(s, it.ID)
	}
	return s
}

// TestConversation runs a stored tool loop with thinking over two
// requests chained by previous_response_id: the second request's hub
// body replays the first turn (thinking blocks restored before the tool
// call), and the input items of each response list the conversation.
func TestConversation(t *testing.T) {
	tr := testTranslator()
	first := `{"model":"m","instructions":"Use tools.","input":[{"role":"user","content":[{"type":"input_text","text":"Weather?"},{"type":"input_image","image_url":"data:image/png;base64,AA"}]}],` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"reasoning":{"effort":"high","summary":"auto"}}`
	x, err := newX(tr, []byte(first), nil)
	if err != nil {
		t.Fatal(err)
	}
	answer := `{"id":"c","object":"chat.completion","created":1,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"reasoning_content":"Need the tool.","thinking_blocks":[{"type":"thinking","thinking":"Need the tool.","signature":"sig-9"}],` +
		`"tool_calls":[{"id":"toolu_9","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	resp, err := x.Response([]byte(answer))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(resp), "encrypted_content") {
		t.Error("the Response carries encrypted_content though include did not ask for it")
	}
	record := x.Record()
	if record == nil {
		t.Fatal("no record for a stored response")
	}

	// GET /v1/responses/{id}
	got, err := StoredResponse(record, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, string(got), string(resp)) {
		t.Errorf("StoredResponse = %s, want the Response the client got %s", got, resp)
	}
	decodeResponse(t, got)
	withEnc, err := StoredResponse(record, []string{"reasoning.encrypted_content"})
	if err != nil || !strings.HasPrefix(gjson.GetBytes(withEnc, "output.0.encrypted_content").Str, encryptedPrefix) {
		t.Errorf("StoredResponse with include: %s (%v)", withEnc, err)
	}

	// The next request continues the conversation with the tool's output.
	history, err := History(record)
	if err != nil {
		t.Fatal(err)
	}
	second := `{"model":"m","previous_response_id":"` + x.ID() + `","input":[{"type":"function_call_output","call_id":"toolu_9","output":"14 C"}],` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`
	info, err := Validate([]byte(second))
	if err != nil || info.PreviousResponseID != x.ID() || !info.Store {
		t.Fatalf("Validate: %+v %v", info, err)
	}
	y, err := newX(tr, []byte(second), history)
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(y.ChatBody(), "messages").Array()
	if len(msgs) != 3 {
		t.Fatalf("hub messages %s, want the user message, the assistant's tool call and the tool output (no instructions: they do not carry over)", gjson.GetBytes(y.ChatBody(), "messages").Raw)
	}
	if msgs[0].Get("role").Str != "user" || msgs[0].Get("content.1.image_url.url").Str != "data:image/png;base64,AA" {
		t.Errorf("message 0 = %s", msgs[0].Raw)
	}
	if msgs[1].Get("thinking_blocks.0.signature").Str != "sig-9" || msgs[1].Get("tool_calls.0.id").Str != "toolu_9" || msgs[1].Get("reasoning_content").Str != "Need the tool." {
		t.Errorf("message 1 = %s, want the thinking block restored with the tool call", msgs[1].Raw)
	}
	if msgs[2].Get("role").Str != "tool" || msgs[2].Get("tool_call_id").Str != "toolu_9" {
		t.Errorf("message 2 = %s", msgs[2].Raw)
	}
	if _, err := providers.ValidateChat(y.ChatBody()); err != nil {
		t.Error(err)
	}
	if _, err := y.Response([]byte(`{"choices":[{"message":{"role":"assistant","content":"14 C in Paris."},"finish_reason":"stop"}]}`)); err != nil {
		t.Fatal(err)
	}
	record2 := y.Record()

	// The input items of the second response: the whole conversation.
	list, err := InputItems(record2, ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	l := decodeItemList(t, list)
	wantTypes := []string{"function_call_output", "function_call", "reasoning", "message"} // newest first
	if len(l.Data) != len(wantTypes) {
		t.Fatalf("%d input items, want %d:\n%s", len(l.Data), len(wantTypes), list)
	}
	for i, typ := range wantTypes {
		if l.Data[i].Type != typ || l.Data[i].ID == "" {
			t.Errorf("item %d: %s %q, want %s", i, l.Data[i].Type, l.Data[i].ID, typ)
		}
	}
	if l.FirstID != l.Data[0].ID || l.LastID != l.Data[3].ID || l.HasMore {
		t.Errorf("first %q last %q has_more %v", l.FirstID, l.LastID, l.HasMore)
	}
	if strings.Contains(string(list), "encrypted_content") || strings.Contains(string(list), "data:image") {
		t.Errorf("the list shows encrypted_content or image URLs without include:\n%s", list)
	}
	full, err := InputItems(record2, ListParams{Order: "asc", Include: []string{"reasoning.encrypted_content", "message.input_image.image_url"}})
	if err != nil {
		t.Fatal(err)
	}
	fl := decodeItemList(t, full)
	if got := gjson.GetBytes(full, "data.0.content.1.image_url").Str; got != "data:image/png;base64,AA" {
		t.Errorf("image_url with include: %q", got)
	}
	if !strings.HasPrefix(gjson.GetBytes(full, "data.1.encrypted_content").Str, encryptedPrefix) {
		t.Errorf("encrypted_content with include:\n%s", full)
	}

	// Pages.
	p1, _ := InputItems(record2, ListParams{Order: "asc", Limit: 3})
	l1 := decodeItemList(t, p1)
	p2, _ := InputItems(record2, ListParams{Order: "asc", Limit: 3, After: l1.LastID})
	l2 := decodeItemList(t, p2)
	if !l1.HasMore || l2.HasMore || strings.Join(append(ids(l1), ids(l2)...), ",") != strings.Join(ids(fl), ",") {
		t.Errorf("pages %v (more %v) and %v (more %v), want %v", ids(l1), l1.HasMore, ids(l2), l2.HasMore, ids(fl))
	}
	empty, _ := InputItems(record2, ListParams{After: l.LastID})
	if le := decodeItemList(t, empty); len(le.Data) != 0 || le.HasMore || gjson.GetBytes(empty, "first_id").Type != gjson.Null {
		t.Errorf("past the end: %s", empty)
	}
	if _, err := InputItems(record2, ListParams{After: "msg_nope"}); err == nil {
		t.Error("an unknown after id was accepted")
	}
}

// TestStreamRecord checks that a streamed stored response leaves the same
// kind of record, and that an unstored one leaves none.
func TestStreamRecord(t *testing.T) {
	hub := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	for _, store := range []bool{true, false} {
		body := `{"model":"m","input":"hello","stream":true,"store":` + map[bool]string{true: "true", false: "false"}[store] + `}`
		x := newExchange(t, []byte(body))
		if x.Record() != nil {
			t.Fatal("a record before the answer")
		}
		translateStream(x, []byte(hub), nil)
		rec := x.Record()
		if (rec != nil) != store {
			t.Fatalf("store %v: record %s", store, rec)
		}
		if !store {
			continue
		}
		l := decodeItemList(t, must(InputItems(rec, ListParams{})))
		if len(l.Data) != 1 || l.Data[0].Type != "message" || l.Data[0].Role != "user" {
			t.Errorf("input items %+v", l.Data)
		}
		r := decodeResponse(t, must(StoredResponse(rec, nil)))
		if r.OutputText() != "hi" || r.Status != "completed" || r.ID != x.ID() {
			t.Errorf("stored response %s %s %q", r.ID, r.Status, r.OutputText())
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestStoredErrors(t *testing.T) {
	for _, rec := range []string{``, `{`, `{"input":{},"response":{}}`, `{"input":[]}`} {
		if _, err := History([]byte(rec)); err == nil {
			t.Errorf("History(%q) accepted it", rec)
		}
		if _, err := InputItems([]byte(rec), ListParams{}); err == nil {
			t.Errorf("InputItems(%q) accepted it", rec)
		}
	}
	if _, err := StoredResponse([]byte(`{"input":[]}`), nil); err == nil {
		t.Error("StoredResponse of a record without a response")
	}
}

func TestParseListParams(t *testing.T) {
	q, _ := url.ParseQuery("limit=5&order=asc&after=msg_1&include[]=reasoning.encrypted_content&include[]=message.input_image.image_url")
	p, err := ParseListParams(q)
	if err != nil || p.Limit != 5 || p.Order != "asc" || p.After != "msg_1" || len(p.Include) != 2 {
		t.Errorf("ParseListParams = %+v, %v", p, err)
	}
	for _, bad := range []string{"limit=0", "limit=101", "limit=x", "order=up"} {
		q, _ := url.ParseQuery(bad)
		var e *providers.Error
		if _, err := ParseListParams(q); !errors.As(err, &e) || e.Status != 400 {
			t.Errorf("%s: %v, want a 400", bad, err)
		}
	}
}

// The query a stored-response request sends to the provider that stores
// the response holds only what the gateway knows, written anew: whatever
// else the client put in its query (a key, a provider's own option) is
// left out, and a value the gateway cannot vouch for is refused.
func TestStoredQuery(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query string
		items bool
		want  string // "" and code: refused with that code
		code  string
	}{
		{"nothing", "", false, "", ""},
		{"include", "include[]=reasoning.encrypted_content", false, "include%5B%5D=reasoning.encrypted_content", ""},
		{"include without brackets", "include=message.input_image.image_url", false, "include%5B%5D=message.input_image.image_url", ""},
		{"what the gateway does not know stays", "include[]=reasoning.encrypted_content&api_key=sk-secret&api-version=2020-01-01&starting_after=3&x=1",
			false, "include%5B%5D=reasoning.encrypted_content", ""},
		{"list parameters of a response are not passed", "limit=5&order=asc&after=msg_1", false, "", ""},
		{"stream false", "stream=false", false, "", ""},
		{"stream", "stream=true", false, "", "unsupported_parameter"},
		{"a smuggled parameter", "include[]=reasoning.encrypted_content%26api_key%3Dx", false, "", "invalid_value"},
		{"items", "limit=5&order=asc&after=msg_1&include[]=reasoning.encrypted_content&token=t",
			true, "after=msg_1&include%5B%5D=reasoning.encrypted_content&limit=5&order=asc", ""},
		{"items: a bad limit", "limit=500", true, "", "invalid_value"},
		{"items: a bad after", "after=msg_1%2F..%2Fx", true, "", "invalid_value"},
		{"items: stream is not theirs", "stream=true", true, "", ""},
		{"too many includes", strings.Repeat("include[]=a&", maxIncludes+1), false, "", "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := StoredQuery(q, tc.items)
			if tc.code != "" {
				var e *providers.Error
				if !errors.As(err, &e) || e.Status != 400 || e.Code != tc.code {
					t.Fatalf("StoredQuery = %q, %v; want a 400 %s", got, err, tc.code)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("StoredQuery = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// FuzzStoredQuery checks that whatever a client's query holds, the query
// sent on holds nothing but the parameters the gateway knows, or the
// request is refused with a 400.
func FuzzStoredQuery(f *testing.F) {
	f.Add("include[]=reasoning.encrypted_content&api_key=x", false)
	f.Add("limit=5&order=asc&after=msg_1&include=a.b", true)
	f.Add("stream=true&starting_after=2", false)
	f.Fuzz(func(t *testing.T, raw string, items bool) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		out, err := StoredQuery(q, items)
		if err != nil {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		sent, err := url.ParseQuery(out)
		if err != nil {
			t.Fatalf("the query sent on does not parse: %q: %v", out, err)
		}
		known := map[string]bool{"include[]": true}
		if items {
			known["limit"], known["order"], known["after"] = true, true, true
		}
		for k, vs := range sent {
			if !known[k] {
				t.Fatalf("%q sent on from %q", k, raw)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "&=?#/%") {
					t.Fatalf("%s=%q sent on from %q", k, v, raw)
				}
			}
		}
	})
}

func TestDeletedAndNotFound(t *testing.T) {
	if got := string(Deleted("resp_1")); got != `{"id":"resp_1","object":"response","deleted":true}` {
		t.Errorf("Deleted = %s", got)
	}
	e := NotFound("resp_x")
	if e.Status != 404 || !strings.Contains(string(e.JSON()), "resp_x") {
		t.Errorf("NotFound = %d %s", e.Status, e.JSON())
	}
}
