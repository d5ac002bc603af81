package bedrock

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// TestMessagesRequest checks the InvokeModel request for a Messages body:
// the body as the client sent it but for model and stream, with Bedrock's
// anthropic_version and the betas of the header and the body together;
// the path per stream; and ErrNotNative for other models and for
// count_tokens.
func TestMessagesRequest(t *testing.T) {
	m := Messages{BaseModels: map[string]string{"arn:aws:bedrock:us-east-1:1:application-inference-profile/abc": "anthropic.claude-sonnet-4-5-20250929-v1:0"}}
	body := `{"model":"x","max_tokens":1024,"stream":true,"anthropic_version":"2023-06-01","anthropic_beta":["b2","b1"],
		"thinking":{"type":"adaptive","display":"omitted"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
		"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],
		"tools":[{"name":"Read","input_schema":{"type":"object"},"defer_loading":true}]}`
	h := http.Header{"Anthropic-Beta": {"b1, b3", "b4"}, "Anthropic-Version": {"2023-06-01"}}
	req, err := m.NativeRequest("/messages", []byte(body), "us.anthropic.claude-sonnet-4-5-20250929-v1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	if req.Path != "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream" || req.Framing != MessagesStream || len(req.Header) != 0 {
		t.Errorf("path %s, framing %v, header %v", req.Path, req.Framing, req.Header)
	}
	got := gjson.ParseBytes(req.Body)
	if got.Get("model").Exists() || got.Get("stream").Exists() || got.Get("anthropic_version").Str != AnthropicVersion ||
		got.Get("anthropic_beta").Raw != `["b1","b3","b4","b2"]` {
		t.Errorf("body %s", req.Body)
	}
	for _, k := range []string{"max_tokens", "thinking", "context_management", "messages", "tools"} {
		if got.Get(k).Raw != providers.CompactJSON(gjson.Get(body, k).Raw) {
			t.Errorf("%s = %s, want it as sent", k, got.Get(k).Raw)
		}
	}

	req, err = m.NativeRequest("/messages", []byte(`{"model":"x","max_tokens":5,"messages":[]}`), "arn:aws:bedrock:us-east-1:1:application-inference-profile/abc", nil)
	if err != nil || req.Path != "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Aapplication-inference-profile%2Fabc/invoke" || req.Framing != nil ||
		gjson.GetBytes(req.Body, "anthropic_beta").Exists() {
		t.Errorf("not streamed: %v %s %s", err, req.Path, req.Body)
	}
	for _, tc := range []struct{ path, model string }{
		{"/messages", "amazon.nova-2-lite-v1:0"},
		{"/messages", "meta.llama4-maverick-17b-instruct-v1:0"},
		{"/messages/count_tokens", "anthropic.claude-sonnet-4-5-20250929-v1:0"},
	} {
		if _, err := m.NativeRequest(tc.path, []byte(`{"model":"x"}`), tc.model, nil); !errors.Is(err, providers.ErrNotNative) {
			t.Errorf("%s %s: %v, want ErrNotNative", tc.path, tc.model, err)
		}
	}
}

// frame encodes an event-stream message (of headers that encode).
func frame(headers eventstream.Headers, payload string) []byte {
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: headers, Payload: []byte(payload)}); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// chunk is the chunk message that carries one of Anthropic's events.
func chunk(event string) []byte {
	return frame(eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue("chunk")},
		{Name: ":message-type", Value: eventstream.StringValue("event")},
	}, `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(event))+`","p":"abc"}`)
}

// TestMessagesStream checks the framing of a Claude stream: each chunk's
// event comes out as Anthropic's server-sent event, whatever the pieces
// the bytes arrive in; messages of other types are skipped; an exception
// becomes Anthropic's error event; a chunk that holds no event is an
// error.
func TestMessagesStream(t *testing.T) {
	var stream []byte
	stream = append(stream, chunk(`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3}}}`)...)
	stream = append(stream, frame(eventstream.Headers{
		{Name: ":event-type", Value: eventstream.StringValue("initial-response")},
		{Name: ":message-type", Value: eventstream.StringValue("event")}}, `{}`)...)
	stream = append(stream, chunk(`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB+/="}}`)...)
	stream = append(stream, frame(eventstream.Headers{
		{Name: ":exception-type", Value: eventstream.StringValue("throttlingException")},
		{Name: ":message-type", Value: eventstream.StringValue("exception")}}, `{"message":"Too many requests"}`)...)
	want := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":3}}}",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB+/=\"}}",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Too many requests\"}}",
	}
	for _, step := range []int{len(stream), 1, 7} {
		var got []string
		var buf []byte
		for i := 0; i < len(stream); i += step {
			buf = append(buf, stream[i:min(i+step, len(stream))]...)
			for {
				ev, rest, ok, err := MessagesStream.Cut(buf)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, string(ev))
				buf = rest
			}
		}
		if len(got) != len(want) || len(buf) != 0 {
			t.Fatalf("step %d: %q, %d bytes left", step, got, len(buf))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("step %d, event %d:\n%s\nwant\n%s", step, i, got[i], want[i])
			}
		}
	}
	if !MessagesStream.IsStream("application/vnd.amazon.eventstream") || MessagesStream.IsStream("application/json") {
		t.Error("IsStream")
	}
	for _, bad := range []string{`{"bytes":"!!"}`, `{"bytes":"` + base64.StdEncoding.EncodeToString([]byte(`{"no":"type"}`)) + `"}`, `[1]`} {
		f := frame(eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue("chunk")},
			{Name: ":message-type", Value: eventstream.StringValue("event")}}, bad)
		if _, _, _, err := MessagesStream.Cut(f); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// FuzzMessagesStream feeds arbitrary bytes to the Claude stream framing:
// it never panics, and what it hands on is one server-sent event.
func FuzzMessagesStream(f *testing.F) {
	f.Add(chunk(`{"type":"message_stop"}`))
	f.Add(append(chunk(`{"type":"ping"}`), 0, 0, 0, 16))
	f.Add([]byte("not a stream"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for range 64 {
			ev, rest, ok, err := MessagesStream.Cut(b)
			if err != nil || !ok {
				return
			}
			if !bytes.HasPrefix(ev, []byte("event: ")) || bytes.Count(ev, []byte("\n")) != 1 {
				t.Fatalf("not one server-sent event: %q", ev)
			}
			b = rest
		}
	})
}
