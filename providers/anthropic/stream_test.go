package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
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
	translatortest.CheckUnifiedStream(t, out, providers.StreamOptions{IncludeUsage: true})
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
