package bedrock

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
)

// FuzzChatRequest checks that every body ValidateChat accepts either
// translates into valid JSON and a path that keeps the model in one
// segment, or fails with a 4xx *providers.Error.
func FuzzChatRequest(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, requestDir, ".unified.json") {
		data := translatortest.ReadFile(f, filepath.Join(requestDir, name+".unified.json"))
		f.Add(data, testModel, false)
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"a\":[1,{}]}"}}]}]}`), "m/../x?y", true)
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],"tools":[{"type":"function","function":{"name":"f","parameters":{ }}}],"tool_choice":"required","response_format":{"type":"json_object"}}`), "us.amazon.nova-2-lite-v1:0", false)

	f.Fuzz(func(t *testing.T, body []byte, model string, toolMode bool) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		c := Chat{}
		if toolMode {
			c.StructuredOutput = StructuredTool
		}
		req, err := c.ChatRequest(body, model)
		if !providerkit.CheckFuzzedRequest(t, body, req, err) {
			return
		}
		segs := strings.Split(req.Path, "/")
		if len(segs) != 4 || segs[1] != "model" || segs[2] == "." || segs[2] == ".." || strings.ContainsAny(req.Path, "?#") {
			t.Fatalf("model %q gives path %q", model, req.Path)
		}
	})
}

// FuzzChatResponse checks that any answer body translates into valid JSON
// or fails with an error.
func FuzzChatResponse(f *testing.F) {
	translatortest.SeedFiles(f, responseDir, ".bedrock.json")
	f.Add([]byte(`{"output":{"message":{"content":[{"toolUse":{"name":"json_tool_call","input":"x"}},{"reasoningContent":{"reasoningText":{"text":7,"signature":"s"}}}]}}}`))
	providerkit.FuzzChatResponse(f, Chat{}.ChatResponse)
}

// FuzzError checks that any error answer maps to an error with a status
// and valid JSON.
func FuzzError(f *testing.F) {
	f.Add(429, "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", []byte(`{"message":"slow down"}`))
	f.Add(400, "", []byte(`{"__type":"a#ValidationException","message":"Input is too long for requested model."}`))
	f.Add(502, "", []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, typ string, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		h := http.Header{}
		h.Set("X-Amzn-Errortype", typ)
		e := Chat{}.Error(status, h, body)
		if e.Status < 400 || e.Status > 599 || e.Message == "" || !json.Valid(e.JSON()) {
			t.Fatalf("Error(%d, %q, %q) = %d %s", status, typ, body, e.Status, e.JSON())
		}
	})
}

// FuzzCut checks the framing on arbitrary bytes: no panic, a cut message
// is the prefix its prelude announces, and an incomplete one is never cut.
func FuzzCut(f *testing.F) {
	for _, tr := range readTranscripts(f) {
		f.Add(tr.upstream)
	}
	f.Add([]byte{0, 0, 0, 16, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, buf []byte) {
		event, rest, ok, err := EventStream.Cut(buf)
		if err != nil || !ok {
			if ok {
				t.Fatal("ok with an error")
			}
			return
		}
		if len(buf) < preludeLen {
			t.Fatal("cut a message shorter than a prelude")
		}
		total := int(binary.BigEndian.Uint32(buf))
		if total > len(buf) || !bytes.Equal(rest, buf[total:]) {
			t.Fatalf("%d bytes left of %d, prelude says %d", len(rest), len(buf), total)
		}
		if _, _, _, err := parseEvent(event); err != nil {
			t.Fatalf("Cut handed on %q: %v", event, err)
		}
		if _, _, ok, _ := EventStream.Cut(buf[:total-1]); ok {
			t.Fatal("cut an incomplete message")
		}
	})
}

// FuzzStream feeds arbitrary bytes, framed by EventStream, through a
// stream translator and checks that what comes out is a well-formed
// unified stream.
func FuzzStream(f *testing.F) {
	for _, tr := range readTranscripts(f) {
		f.Add(tr.upstream, tr.opts.IncludeUsage)
	}
	translatortest.Replay{New: Chat{}.ChatStream, Framing: EventStream}.Fuzz(f)
}

// FuzzEvent encodes arbitrary event types and payloads as real
// event-stream messages, so the translator's JSON handling is reached, and
// checks the unified output after each.
func FuzzEvent(f *testing.F) {
	f.Add("messageStart", `{"role":"assistant"}`, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	f.Add("contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"name":"f","toolUseId":"t"}}}`,
		"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"a\": \"b c\"}"}}}`)
	f.Add("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"x","signature":"s","redactedContent":"AAAA"}}}`,
		"contentBlockStop", `{"contentBlockIndex":0}`)
	f.Add("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"name":"json_tool_call","toolUseId":"t"}}}`,
		"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"\"\\u00e9"}}}`)
	f.Add("messageStop", `{"stopReason":"tool_use"}`, "metadata", `{"usage":{"inputTokens":1e3,"outputTokens":-1}}`)
	f.Fuzz(func(t *testing.T, type1, payload1, type2, payload2 string) {
		tr := Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true})
		if len(type1) > 32767 || len(type2) > 32767 {
			return // longer than an event-stream header value can be
		}
		var out []byte
		failed := false
		for _, ev := range [][2]string{{"messageStart", `{}`}, {type1, payload1}, {type2, payload2},
			{"messageStop", `{"stopReason":"end_turn"}`}, {"metadata", `{}`}} {
			var err error
			if out, err = tr.Event(out, event(t, ev[0], ev[1])); err != nil {
				// The gateway ends the stream with its own error.
				out = append(out, "data: {\"error\":{}}\n\n"...)
				failed = true
				break
			}
		}
		if !failed {
			out = tr.Close(out)
		}
		if msg := providerkit.ValidUnifiedStream(out); msg != "" {
			t.Fatalf("%s\nevents: %q %q, %q %q\nunified:\n%s", msg, type1, payload1, type2, payload2, out)
		}
	})
}

// FuzzEmbeddingsRequest checks that every body ValidateEmbeddings accepts
// either translates into requests of valid JSON on the model's invoke path,
// every input in one of them, or fails with a 4xx *providers.Error.
func FuzzEmbeddingsRequest(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, embedDir, ".unified.json") {
		data := translatortest.ReadFile(f, filepath.Join(embedDir, name+".unified.json"))
		f.Add(data, gjson.GetBytes(data, "model").Str)
	}
	f.Add([]byte(`{"model":"m","input":[[1,2]],"dimensions":256}`), "cohere.embed-v4:0")
	f.Add([]byte(`{"model":"m","input":["a","b"],"input_type":"\u0000"}`), "us.amazon.titan-embed-text-v2:0/../x")

	f.Fuzz(func(t *testing.T, body []byte, model string) {
		req, err := providers.ValidateEmbeddings(body)
		if err != nil {
			return
		}
		reqs, err := Embeddings{}.EmbeddingsRequests(&req, model)
		if err != nil {
			var e *providers.Error
			if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 {
				t.Fatalf("EmbeddingsRequests error %v is not a 4xx *providers.Error", err)
			}
			return
		}
		path, _ := InvokePath(model)
		inputs := 0
		for _, r := range reqs {
			if r.Path != path || !json.Valid(r.Body) {
				t.Fatalf("request %s %s", r.Path, r.Body)
			}
			root := gjson.ParseBytes(r.Body)
			if root.Get("inputText").Exists() {
				inputs++
			} else {
				inputs += len(root.Get("texts").Array())
			}
		}
		if inputs != req.Inputs() {
			t.Fatalf("%d inputs sent for %d", inputs, req.Inputs())
		}
	})
}

// FuzzEmbeddingsResponse checks that any answer is read or refused, never
// a panic, and that what it reads makes a valid unified answer.
func FuzzEmbeddingsResponse(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, embedResponseDir, ".bedrock.json") {
		data := translatortest.ReadFile(f, filepath.Join(embedResponseDir, name+".bedrock.json"))
		for _, a := range gjson.GetBytes(data, "answers").Array() {
			f.Add([]byte(a.Get("body").Raw), a.Get("header.X-Amzn-Bedrock-Input-Token-Count").Str)
		}
	}
	f.Add([]byte(`{"embeddings":{"float":[[1e39]]}}`), "-1")

	f.Fuzz(func(t *testing.T, body []byte, count string) {
		var res providers.EmbeddingsResult
		h := http.Header{"X-Amzn-Bedrock-Input-Token-Count": {count}}
		if err := (Embeddings{}).EmbeddingsResponse(0, h, body, &res); err != nil {
			return
		}
		req := providers.EmbeddingsRequest{Model: "m", Texts: make([]string, len(res.Vectors))}
		for _, b64 := range []bool{false, true} {
			req.Base64 = b64
			out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
			if !ok || !json.Valid(out) {
				t.Fatalf("invalid answer for %s:\n%s", body, out)
			}
		}
	})
}
