package cohere

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	cohere "github.com/cohere-ai/cohere-go/v2"
	cohereclient "github.com/cohere-ai/cohere-go/v2/client"
	cohereoption "github.com/cohere-ai/cohere-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/sse"
)

// These tests hold the translator to Cohere's own SDK, cohere-go, whose
// types are the wire format's definition.

// TestRequestMatchesSDK decodes every translated request with cohere-go's
// request type (V2ChatRequest, or V2ChatStreamRequest for a stream),
// encodes it again and compares: a field the SDK does not know (a typo, a
// field of another API) is lost on the way and fails the test, and so is a
// value of the wrong shape.
func TestRequestMatchesSDK(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, requestDir, ".unified.json") {
		t.Run(name, func(t *testing.T) {
			body := translateGolden(t, name).Body
			checkSDKRoundTrip(t, body)
		})
	}
}

// checkSDKRoundTrip fails t unless sdkRoundTrip accepts body.
func checkSDKRoundTrip(t *testing.T, body []byte) {
	t.Helper()
	if err := sdkRoundTrip(body); err != nil {
		t.Errorf("%v\ntranslated:\n%s", err, translatortest.Indent(t, body))
	}
}

// sdkRoundTrip decodes body with cohere-go's request type, encodes it again
// and reports an error unless the two are the same JSON.
func sdkRoundTrip(body []byte) error {
	var again []byte
	var err error
	if gjson.GetBytes(body, "stream").Type == gjson.True {
		var req cohere.V2ChatStreamRequest
		if err = json.Unmarshal(body, &req); err != nil {
			return fmt.Errorf("cohere-go cannot decode the request: %w", err)
		}
		again, err = json.Marshal(&req)
	} else {
		var req cohere.V2ChatRequest
		if err = json.Unmarshal(body, &req); err != nil {
			return fmt.Errorf("cohere-go cannot decode the request: %w", err)
		}
		again, err = json.Marshal(&req)
	}
	if err != nil {
		return fmt.Errorf("cohere-go cannot encode the request it decoded: %w", err)
	}
	var a, b any
	if err := json.Unmarshal(body, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(again, &b); err != nil {
		return err
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("cohere-go does not read the request as written; it reads:\n%s", again)
	}
	return nil
}

// TestSDKRoundTripCatchesTypos makes sure the round trip above fails on a
// wrong field name anywhere in the request.
func TestSDKRoundTripCatchesTypos(t *testing.T) {
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"top_p":0.5}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"tool_choice":"REQUIRED","tools":[{"type":"function","function":{"name":"f","parameters":{},"strict":true}}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":"hi","tool_call":[]}],"stream":false}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x","details":"low"}}]}],"stream":false}`,
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"a","content":"x","name":"f"}],"stream":false}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"thinking":{"type":"enabled","budget_tokens":5}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{}}`,
	} {
		if err := sdkRoundTrip([]byte(body)); err == nil {
			t.Errorf("the round trip does not notice the wrong field in %s", body)
		}
	}
	if err := sdkRoundTrip([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":false,"p":0.5}`)); err != nil {
		t.Errorf("a right request fails the round trip: %v", err)
	}
}

// TestResponsesDecodeWithSDK checks that every answer fixture is a
// V2ChatResponse as cohere-go reads it, field for field.
func TestResponsesDecodeWithSDK(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, responseDir, ".cohere.json") {
		t.Run(name, func(t *testing.T) {
			body := translatortest.ReadFile(t, filepath.Join(responseDir, name+".cohere.json"))
			var res cohere.V2ChatResponse
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatalf("cohere-go cannot decode the answer: %v", err)
			}
			if res.Id == "" || res.FinishReason == "" || res.Message == nil {
				t.Fatalf("cohere-go read %+v", res)
			}
			extras := []map[string]any{res.GetExtraProperties(), res.Message.GetExtraProperties()}
			if res.Usage != nil {
				extras = append(extras, res.Usage.GetExtraProperties())
				if res.Usage.Tokens != nil {
					extras = append(extras, res.Usage.Tokens.GetExtraProperties())
				}
				if res.Usage.BilledUnits != nil {
					extras = append(extras, res.Usage.BilledUnits.GetExtraProperties())
				}
			}
			for _, call := range res.Message.ToolCalls {
				extras = append(extras, call.GetExtraProperties(), call.Function.GetExtraProperties())
			}
			for _, lp := range res.Logprobs {
				extras = append(extras, lp.GetExtraProperties())
			}
			for _, extra := range extras {
				if len(extra) > 0 {
					t.Errorf("fields cohere-go does not know: %v", extra)
				}
			}
			for _, item := range res.Message.Content {
				if item.Type != "text" && item.Type != "thinking" {
					t.Errorf("content item of type %q", item.Type)
				}
			}
		})
	}
}

// TestTranscriptsReadBySDK serves every transcript's upstream stream as
// Cohere would, in pieces of random sizes, and reads it with cohere-go's
// ChatStream, whose reader parses server-sent events as the specification
// frames them (event: and data: lines, a blank line after each event):
// each event must decode as a V2ChatStreamResponse of the type its data
// names. So the transcripts are Cohere's own framing as its SDK reads it.
//
// Cohere ends a stream with "data: [DONE]" after message-end; cohere-go
// v2.16 hands that line to its JSON decoder and fails, so a consumer (and
// this test) stops reading at message-end.
func TestTranscriptsReadBySDK(t *testing.T) {
	for _, path := range translatortest.Transcripts(t, sseDir, ".txt") {
		upstream, _, _ := translatortest.ReadTranscript(t, path)
		if strings.Contains(filepath.Base(path), "error_object") {
			continue // not a chat event: what Cohere's stream carries on failure
		}
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			var want []string
			done := false
			for buf := upstream; ; {
				ev, rest, ok := sse.Cut(buf)
				if !ok {
					break
				}
				buf = rest
				name, data := sse.Fields(ev)
				switch {
				case string(data) == "[DONE]":
					done = true
				case len(data) > 0:
					typ := gjson.GetBytes(data, "type").Str
					if string(name) != typ {
						t.Errorf("event: %s line with data of type %q", name, typ)
					}
					want = append(want, typ)
				}
			}
			rng := rand.New(rand.NewPCG(7, uint64(len(upstream))))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v2/chat" || gjson.GetBytes(readAll(r.Body), "stream").Type != gjson.True {
					http.Error(w, `{"message":"bad request"}`, http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for buf := upstream; len(buf) > 0; {
					n := min(len(buf), 1+rng.IntN(40))
					_, _ = w.Write(buf[:n])
					w.(http.Flusher).Flush()
					buf = buf[n:]
				}
			}))
			defer srv.Close()
			client := cohereclient.NewClient(cohereoption.WithBaseURL(srv.URL), cohereoption.WithToken("test"))
			stream, err := client.V2.ChatStream(context.Background(), &cohere.V2ChatStreamRequest{
				Model:    "command-a-03-2025",
				Messages: cohere.ChatMessages{{Role: "user", User: &cohere.UserMessageV2{Content: &cohere.UserMessageV2Content{String: "hi"}}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer stream.Close()
			var got []string
			for len(got) < len(want) {
				ev, err := stream.Recv()
				if err != nil {
					t.Fatalf("cohere-go cannot read event %d (%s): %v", len(got), want[len(got)], err)
				}
				got = append(got, ev.Type)
				if ev.Type == "message-end" && ev.MessageEnd.GetDelta() == nil {
					t.Errorf("message-end without delta")
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cohere-go read events %v, want %v", got, want)
			}
			if !done {
				if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
					t.Errorf("after the last event: %v, want io.EOF", err)
				}
			}
		})
	}
}

func readAll(r io.Reader) []byte {
	b, _ := io.ReadAll(r)
	return b
}
