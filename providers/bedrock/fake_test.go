package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providerkit"
	"github.com/modelgate/modelgate/providers/providertest"
)

// The fake's credentials in these tests.
var fakeCreds = aws.Credentials{AccessKeyID: "AKIDBEDROCKTRANSLATOR", SecretAccessKey: "translator/test/secret/0001"}

func startFake(t *testing.T) *providertest.Server {
	t.Helper()
	return providertest.Start(t, providertest.Options{
		Keys: map[string]string{"bedrock": fakeCreds.AccessKeyID + ":" + fakeCreds.SecretAccessKey},
	})
}

// exchange is one call to the fake: the translated request sent signed,
// the answer translated back.
type exchange struct {
	status int
	answer []byte // the unified answer, or the unified error's JSON
	stream []byte // the unified stream, for a stream request
}

// call translates a unified request with c, sends it to the fake signed as
// the SDK signs, and translates what comes back: an answer, a stream (cut
// by the request's framing, in pieces of 7 bytes) or an error.
func call(t *testing.T, fake *providertest.Server, c Chat, body, model string) exchange {
	t.Helper()
	info, err := providers.ValidateChat([]byte(body))
	if err != nil {
		t.Fatalf("ValidateChat: %v", err)
	}
	preq, err := c.ChatRequest([]byte(body), model)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	req, err := http.NewRequest(http.MethodPost, fake.URL+preq.Path, bytes.NewReader(preq.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.RawPath = preq.Path // the path is escaped already, as the SDK escapes it
	req.Header.Set("Content-Type", "application/json")
	for k, v := range preq.Header {
		req.Header[k] = v
	}
	sum := sha256.Sum256(preq.Body)
	if err := v4.NewSigner().SignHTTP(context.Background(), fakeCreds, req, hex.EncodeToString(sum[:]), "bedrock", "eu-west-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	res, raw := providertest.Do(t, req)
	ex := exchange{status: res.StatusCode}
	switch {
	case res.StatusCode >= 400:
		e := c.Error(res.StatusCode, res.Header, raw)
		ex.status, ex.answer = e.Status, e.JSON()
	case info.Stream:
		if !preq.Framing.IsStream(res.Header.Get("Content-Type")) {
			t.Fatalf("a stream answered as %s", res.Header.Get("Content-Type"))
		}
		tr := c.ChatStream(providers.StreamOptions{IncludeUsage: info.IncludeUsage})
		var out, buf []byte
		for len(raw) > 0 {
			n := min(7, len(raw))
			buf, raw = append(buf, raw[:n]...), raw[n:]
			if out, buf, err = feed(tr, out, buf); err != nil {
				t.Fatalf("stream: %v", err)
			}
		}
		ex.stream = tr.Close(out)
		providerkit.CheckUnifiedStream(t, ex.stream, providers.StreamOptions{IncludeUsage: info.IncludeUsage})
	default:
		if ex.answer, _, err = c.ChatResponse(raw); err != nil {
			t.Fatalf("ChatResponse: %v\n%s", err, raw)
		}
	}
	return ex
}

// TestGoldenRequestsToFake sends every golden request, translated, to the
// fake, which checks them as strictly as Bedrock: all are taken, as
// Converse and as ConverseStream requests.
func TestGoldenRequestsToFake(t *testing.T) {
	fake := startFake(t)
	// The fake signs its own reasoning; a block from elsewhere is refused
	// as Claude refuses a forged one.
	refused := map[string]string{"thinking_roundtrip": "Invalid `signature`"}
	for _, name := range translatortest.GoldenCases(t, requestDir, ".unified.json") {
		in := translatortest.ReadFile(t, filepath.Join(requestDir, name+".unified.json"))
		c, model := readOptions(t, name)
		for _, stream := range []bool{false, true} {
			body := string(in)
			if !stream {
				body = strings.Replace(body, `"stream": true`, `"stream": false`, 1)
			} else if !strings.Contains(body, `"stream": true`) {
				body = strings.Replace(body, "{", `{"stream": true,`, 1)
			}
			ex := call(t, fake, c, body, model)
			if want, ok := refused[name]; ok {
				if ex.status != 400 || !strings.Contains(string(ex.answer), want) {
					t.Errorf("%s: %d %s, want a 400 about %s", name, ex.status, ex.answer, want)
				}
				continue
			}
			if ex.status != 200 {
				t.Errorf("%s (stream %v): the fake refused it: %d %s", name, stream, ex.status, ex.answer)
			}
		}
	}
}

// chatPair asks the same question once answered, once streamed with
// usage, and checks that the client reads the same from both.
func chatPair(t *testing.T, fake *providertest.Server, c Chat, body, model string) accumulated {
	t.Helper()
	ex := call(t, fake, c, body, model)
	if ex.status != 200 {
		t.Fatalf("%d %s", ex.status, ex.answer)
	}
	streamed := call(t, fake, c, strings.Replace(body, "{", `{"stream":true,"stream_options":{"include_usage":true},`, 1), model)
	a, s := readAnswer(t, ex.answer), accumulateStream(t, streamed.stream)
	am, sm := a.completion.Choices[0].Message, s.completion.Choices[0].Message
	same := am.Content == sm.Content && a.reasoning == s.reasoning &&
		a.completion.Choices[0].FinishReason == s.completion.Choices[0].FinishReason &&
		a.completion.Usage.TotalTokens == s.completion.Usage.TotalTokens && a.completion.Usage.TotalTokens > 0 &&
		len(am.ToolCalls) == len(sm.ToolCalls) && len(a.thinking) == len(s.thinking)
	for i := range am.ToolCalls {
		// Ids differ between two calls to the fake; names and arguments not.
		same = same && am.ToolCalls[i].Function.Name == sm.ToolCalls[i].Function.Name &&
			am.ToolCalls[i].Function.Arguments == sm.ToolCalls[i].Function.Arguments && sm.ToolCalls[i].ID != ""
	}
	if !same {
		t.Errorf("answer and stream differ:\nanswer: %s\nstream: %s", ex.answer, streamed.stream)
	}
	return a
}

func TestChatThroughFake(t *testing.T) {
	fake := startFake(t)
	const user = `{"role":"user","content":"describe Paris"}`

	t.Run("chat", func(t *testing.T) {
		a := chatPair(t, fake, testChat, `{"model":"m","messages":[{"role":"system","content":"be brief"},`+user+`]}`, testModel)
		if m := a.completion.Choices[0].Message; m.Content != "echo: describe Paris" || a.completion.Usage.CompletionTokens != 3 {
			t.Errorf("%+v %+v", m, a.completion.Usage)
		}
	})

	for _, mode := range []string{StructuredNative, StructuredTool} {
		t.Run("structured "+mode, func(t *testing.T) {
			body := `{"model":"m","messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"city","strict":true,` +
				`"schema":{"type":"object","additionalProperties":false,"required":["summary","words"],"properties":{"summary":{"type":"string"},"words":{"type":"integer"}}}}}}`
			a := chatPair(t, fake, Chat{StructuredOutput: mode}, body, testModel)
			var city struct {
				Summary string `json:"summary"`
				Words   int    `json:"words"`
			}
			m := a.completion.Choices[0]
			if err := json.Unmarshal([]byte(m.Message.Content), &city); err != nil || city.Summary != "echo: describe Paris" || city.Words != 3 ||
				m.FinishReason != "stop" || len(m.Message.ToolCalls) != 0 {
				t.Errorf("content %q (%v), finish %s", m.Message.Content, err, m.FinishReason)
			}
		})
	}

	t.Run("json_object", func(t *testing.T) {
		a := chatPair(t, fake, testChat, `{"model":"m","messages":[`+user+`],"response_format":{"type":"json_object"}}`, testModel)
		if c := a.completion.Choices[0].Message.Content; c != `{"text":"echo: describe Paris"}` {
			t.Errorf("content %q", c)
		}
	})

	t.Run("tool loop", func(t *testing.T) {
		tools := `"tools":[{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]`
		body := `{"model":"m","messages":[{"role":"user","content":"weather in Paris"}],` + tools + `}`
		a := chatPair(t, fake, testChat, body, testModel)
		call0 := a.completion.Choices[0].Message.ToolCalls
		if len(call0) != 1 || call0[0].Function.Name != "search" || gjson.Get(call0[0].Function.Arguments, "query").Str != "weather in Paris" ||
			a.completion.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("%+v", a.completion.Choices[0])
		}
		assistant, _ := json.Marshal(a.completion.Choices[0].Message.ToParam())
		next := `{"model":"m","messages":[{"role":"user","content":"weather in Paris"},` + string(assistant) +
			`,{"role":"tool","tool_call_id":"` + call0[0].ID + `","content":"sunny, 21 C"}],` + tools + `}`
		a = chatPair(t, fake, testChat, next, testModel)
		if c := a.completion.Choices[0].Message.Content; c != "tool said: sunny, 21 C" {
			t.Errorf("after the tool: %q", c)
		}
	})

	// With thinking on, the signed reasoning goes back exactly, before the
	// tool call; the fake refuses anything else (see providertest).
	t.Run("thinking tool loop", func(t *testing.T) {
		tools := `"tools":[{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]`
		body := `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"weather in Paris"}],` + tools + `}`
		a := chatPair(t, fake, testChat, body, testModel)
		m := a.completion.Choices[0].Message
		if a.reasoning != "thinking about: weather in Paris" || len(a.thinking) != 1 || len(m.ToolCalls) != 1 {
			t.Fatalf("reasoning %q, thinking %v, calls %d", a.reasoning, a.thinking, len(m.ToolCalls))
		}
		for _, source := range []string{"answer", "stream"} {
			ex := call(t, fake, testChat, body, testModel)
			msg := gjson.GetBytes(ex.answer, "choices.0.message").Raw
			if source == "stream" {
				msg = streamedMessage(t, call(t, fake, testChat, strings.Replace(body, "{", `{"stream":true,`, 1), testModel).stream)
			}
			id := gjson.Get(msg, "tool_calls.0.id").Str
			next := `{"model":"m","reasoning_effort":"low","messages":[{"role":"user","content":"weather in Paris"},` + msg +
				`,{"role":"tool","tool_call_id":"` + id + `","content":"sunny"}],` + tools + `}`
			after := call(t, fake, testChat, next, testModel)
			if after.status != 200 || gjson.GetBytes(after.answer, "choices.0.message.content").Str != "tool said: sunny" {
				t.Errorf("%s: after the tool: %d %s", source, after.status, after.answer)
			}
			// Without its thinking blocks the turn is refused, as Claude
			// refuses it.
			stripped := strings.Replace(next, `"thinking_blocks"`, `"dropped_blocks"`, 1)
			if bad := call(t, fake, testChat, stripped, testModel); bad.status != 400 {
				t.Errorf("%s: without thinking blocks: %d %s", source, bad.status, bad.answer)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		ex := call(t, fake, testChat, `{"model":"m","messages":[`+user+`]}`, "fail-429")
		if ex.status != 429 || gjson.GetBytes(ex.answer, "error.type").Str != "rate_limit_error" {
			t.Errorf("fail-429: %d %s", ex.status, ex.answer)
		}
		ex = call(t, fake, testChat, `{"model":"m","messages":[`+user+`]}`, "fail-529")
		if ex.status != 503 || gjson.GetBytes(ex.answer, "error.code").Str != "service_unavailable" {
			t.Errorf("fail-529: %d %s", ex.status, ex.answer)
		}
		ex = call(t, fake, testChat, `{"model":"m","messages":[`+user+`]}`, "fail-html")
		if ex.status != 502 || strings.Contains(string(ex.answer), "secret-internal-host") {
			t.Errorf("fail-html: %d %s", ex.status, ex.answer)
		}
		for model, code := range map[string]string{"midstream-error": "model_error", "cutoff": "stream_incomplete"} {
			ex = call(t, fake, testChat, `{"model":"m","stream":true,"messages":[`+user+`]}`, model)
			events := providerkit.Data(ex.stream)
			if last := events[len(events)-1]; gjson.GetBytes(last, "error.code").Str != code {
				t.Errorf("%s: stream ends with %s", model, last)
			}
		}
	})

	// A model id with ':' and '/' reaches the fake in one path segment.
	t.Run("ARN", func(t *testing.T) {
		arn := "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
		if ex := call(t, fake, testChat, `{"model":"m","messages":[`+user+`]}`, arn); ex.status != 200 {
			t.Fatalf("%d %s", ex.status, ex.answer)
		}
		if r := fake.Requests(); r[len(r)-1].Model != arn {
			t.Errorf("the fake saw model %q", r[len(r)-1].Model)
		}
	})
}
