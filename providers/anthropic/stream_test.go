package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/sse"
)

const sseDir = "../../testdata/sse/anthropic"

// testReplay replays streams through testChat's translator.
var testReplay = translatortest.Replay{New: testChat.ChatStream}

func TestStreamTranscripts(t *testing.T) {
	testReplay.Transcripts(t, sseDir)
}

func TestStreamMalformedEvent(t *testing.T) {
	testReplay.Refuses(t,
		"event: message_start\ndata: {\"type\":\"message_start\",",
		"data: [DONE]",
		"data: 42",
	)
}

func TestStreamEmptyEvents(t *testing.T) {
	testReplay.Ignores(t, "", ": comment", "event: ping", "id: 7\nretry: 100")
}

func TestStreamErrorTypes(t *testing.T) {
	tests := []struct{ typ, wantType, wantCode string }{
		{"overloaded_error", "server_error", "overloaded"},
		{"api_error", "server_error", "api_error"},
		{"rate_limit_error", "rate_limit_error", "rate_limit_exceeded"},
		{"invalid_request_error", "invalid_request_error", "invalid_request_error"},
		{"something_new", "server_error", "something_new"},
		{"", "server_error", ""},
	}
	for _, tt := range tests {
		tr := testChat.ChatStream(providers.StreamOptions{IncludeUsage: true})
		ev := `event: error` + "\n" + `data: {"type":"error","error":{"type":"` + tt.typ + `","message":"m"}}`
		out, err := tr.Event(nil, []byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		out = tr.Close(out)
		var got struct{ Error providers.Error }
		if err := json.Unmarshal(bytes.TrimPrefix(out, []byte("data: ")), &got); err != nil {
			t.Fatalf("%s: %v: %q", tt.typ, err, out)
		}
		if got.Error.Type != tt.wantType || got.Error.Code != tt.wantCode || got.Error.Message != "m" ||
			bytes.Count(out, []byte("data: ")) != 1 {
			t.Errorf("%s: got %q, want type %s code %s", tt.typ, out, tt.wantType, tt.wantCode)
		}
	}
}

// TestStreamNoMessageStart checks that content arriving without a
// message_start still makes well-formed chunks.
func TestStreamNoMessageStart(t *testing.T) {
	upstream := "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"index\":5,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
		"data: {\"type\":\"message_stop\"}\n\n"
	out, err := testReplay.Translate(providers.StreamOptions{IncludeUsage: true}, []byte(upstream), nil)
	if err != nil {
		t.Fatal(err)
	}
	providerkit.CheckUnifiedStream(t, out, providers.StreamOptions{IncludeUsage: true})
	want := `data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		`data: {"id":"","object":"chat.completion.chunk","created":1750000000,"model":"","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}` + "\n\n" +
		"data: [DONE]\n\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// TestStreamKeepsNoEventBytes feeds each transcript's events from one
// buffer that is overwritten after every event, as the gateway reuses its
// buffer of the provider's bytes: the translator reads events in place,
// and what it keeps of one for later (the head, a thinking block's text
// and signature, a tool call's state) must be its own copy.
func TestStreamKeepsNoEventBytes(t *testing.T) {
	for _, path := range translatortest.Transcripts(t, sseDir, ".txt") {
		upstream, _, opts := translatortest.ReadTranscript(t, path)
		want, err := testReplay.Translate(opts, upstream, nil)
		tr := testChat.ChatStream(opts)
		var got, scratch []byte
		var gotErr error
		for rest := upstream; gotErr == nil; {
			ev, r, ok := sse.Cut(rest)
			if !ok {
				break
			}
			rest = r
			scratch = append(scratch[:0], ev...)
			got, gotErr = tr.Event(got, scratch)
			for i := range scratch {
				scratch[i] = 'x'
			}
		}
		if gotErr == nil {
			got = tr.Close(got)
		}
		if !bytes.Equal(got, want) || (err == nil) != (gotErr == nil) {
			t.Errorf("%s: events from a reused buffer:\n got %q (%v)\nwant %q (%v)", path, got, gotErr, want, err)
		}
	}
}

// TestStreamTextDeltaForms checks that a text delta reads the same
// whatever its form: Anthropic's own (read by its form), or keys in
// another order, spaces, keys more (read key by key); and that a
// malformed one is refused either way.
func TestStreamTextDeltaForms(t *testing.T) {
	const start = `data: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":3,"output_tokens":1}}}`
	chunk := func(content string) string {
		return `data: {"id":"msg_1","object":"chat.completion.chunk","created":1750000000,"model":"m","choices":[{"index":0,"delta":{"content":` +
			content + `},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	}
	for _, tc := range []struct {
		data, want string // want "": no chunk; "error": refused
	}{
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi \"there\"\n"}}`, chunk(`"Hi \"there\"\n"`)},
		{`{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":"é \u00e9"}}`, chunk(`"é \u00e9"`)},
		{`{"index":0,"type":"content_block_delta","delta":{"text":"Hi","type":"text_delta"}}`, chunk(`"Hi"`)},
		{`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}`, chunk(`"Hi"`)},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi","citations":[]}}`, chunk(`"Hi"`)},
		// The text ends where its string ends, not at the last quote.
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"x":{"y":"b"}}`, chunk(`"a"`)},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, ""},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}`, ""},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a` + "\x01" + `"}}`, "error"},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\q"}}`, "error"},
		{`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"a"}}`, "error"},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}}`, "error"},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a}}`, "error"},
	} {
		tr := testChat.ChatStream(providers.StreamOptions{IncludeUsage: true})
		if _, err := tr.Event(nil, []byte(start)); err != nil {
			t.Fatal(err)
		}
		got, err := tr.Event(nil, []byte("event: content_block_delta\ndata: "+tc.data))
		switch {
		case tc.want == "error":
			if err == nil {
				t.Errorf("%s: not refused: %q", tc.data, got)
			}
		case err != nil || string(got) != tc.want:
			t.Errorf("%s:\n got %q (%v)\nwant %q", tc.data, got, err, tc.want)
		}
	}
}
