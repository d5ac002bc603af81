package bedrock

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/modelgate/modelgate/providers"
)

// benchRequest is a realistic multi-turn request with tools, about 2 KB.
const benchRequest = `{
  "model": "my-claude",
  "messages": [
    {"role": "system", "content": "You are a travel assistant. Use the tools to look up facts; never guess weather or prices. Keep answers short and cite the tool you used."},
    {"role": "user", "content": "I'm flying from Paris to Tokyo next Tuesday. What's the weather like in both cities, and what time is it in Tokyo now?"},
    {"role": "assistant", "content": "Let me check that for you.", "tool_calls": [
      {"id": "tooluse_01A09q90qw90lq917835lq9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
      {"id": "tooluse_01B19q90qw90lq917835lq9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}"}},
      {"id": "tooluse_01C29q90qw90lq917835lq9", "type": "function", "function": {"name": "get_time", "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "tooluse_01A09q90qw90lq917835lq9", "content": "{\"temp\": 14, \"conditions\": \"light rain\", \"wind_kph\": 18}"},
    {"role": "tool", "tool_call_id": "tooluse_01B19q90qw90lq917835lq9", "content": "{\"temp\": 22, \"conditions\": \"sunny\", \"wind_kph\": 6}"},
    {"role": "tool", "tool_call_id": "tooluse_01C29q90qw90lq917835lq9", "content": "2026-08-14T21:05:00+09:00"},
    {"role": "assistant", "content": "Paris: 14°C with light rain. Tokyo: 22°C and sunny; it is 21:05 there now."},
    {"role": "user", "content": [{"type": "text", "text": "Great. Can you also find a flight price for Tuesday, economy, one adult?"}]}
  ],
  "tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current local time in an IANA time zone.",
      "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}},
    {"type": "function", "function": {"name": "search_flights", "description": "Search flight offers between two airports on a date.",
      "parameters": {"type": "object", "properties": {"from": {"type": "string", "description": "IATA code"}, "to": {"type": "string", "description": "IATA code"}, "date": {"type": "string", "format": "date"}, "cabin": {"type": "string", "enum": ["economy", "premium", "business", "first"]}, "adults": {"type": "integer", "minimum": 1}}, "required": ["from", "to", "date"]}}}
  ],
  "tool_choice": "auto",
  "parallel_tool_calls": true,
  "temperature": 0.4,
  "max_completion_tokens": 1024,
  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "user-1234"
}`

const benchResponse = `{"output":{"message":{"role":"assistant","content":[` +
	`{"text":"I'll search flights from CDG to HND for Tuesday in economy for one adult, and compare the cheapest options."},` +
	`{"toolUse":{"toolUseId":"tooluse_01D39q90qw90lq917835lq9","name":"search_flights","input":{"from":"CDG","to":"HND","date":"2026-08-18","cabin":"economy","adults":1}}}]}},` +
	`"stopReason":"tool_use","usage":{"inputTokens":1204,"outputTokens":96,"totalTokens":1812,"cacheReadInputTokens":512,"cacheWriteInputTokens":0},"metrics":{"latencyMs":1650}}`

// benchStream is a 200-event ConverseStream text answer, as event-stream
// bytes.
func benchStream(b *testing.B) []byte {
	enc := eventstream.NewEncoder()
	var buf bytes.Buffer
	add := func(typ, payload string) {
		msg := eventstream.Message{
			Headers: eventstream.Headers{
				{Name: ":event-type", Value: eventstream.StringValue(typ)},
				{Name: ":content-type", Value: eventstream.StringValue("application/json")},
				{Name: ":message-type", Value: eventstream.StringValue("event")},
			},
			Payload: []byte(payload),
		}
		if err := enc.Encode(&buf, msg); err != nil {
			b.Fatal(err)
		}
	}
	add("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGH","role":"assistant"}`)
	for i := range 196 {
		add("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"word `+strconv.Itoa(i)+` and a few more"},"p":"abcdefghijklmn"}`)
	}
	add("contentBlockStop", `{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstuvwx"}`)
	add("messageStop", `{"p":"abcdefghijklmnop","stopReason":"end_turn"}`)
	add("metadata", `{"metrics":{"latencyMs":412},"p":"abcdefghijkl","usage":{"inputTokens":25,"outputTokens":600,"totalTokens":625}}`)
	return buf.Bytes()
}

func BenchmarkChatRequest(b *testing.B) {
	body := []byte(benchRequest)
	if _, err := providers.ValidateChat(body); err != nil {
		b.Fatal(err)
	}
	c := Chat{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ChatRequest(body, testModel); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkChatResponse(b *testing.B) {
	body := []byte(benchResponse)
	c := Chat{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ChatResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStream translates a whole 200-event answer, cutting each event
// with EventStream as the gateway does.
func BenchmarkStream(b *testing.B) {
	upstream := benchStream(b)
	c := Chat{}
	out := make([]byte, 0, 4*len(upstream))
	b.SetBytes(int64(len(upstream)))
	b.ReportAllocs()
	for b.Loop() {
		tr := c.ChatStream(providers.StreamOptions{IncludeUsage: true})
		out = out[:0]
		buf := upstream
		for {
			event, rest, ok, err := EventStream.Cut(buf)
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				break
			}
			if out, err = tr.Event(out, event); err != nil {
				b.Fatal(err)
			}
			buf = rest
		}
		out = tr.Close(out)
	}
}

// BenchmarkStreamEvent is one text delta: Cut and Event.
func BenchmarkStreamEvent(b *testing.B) {
	upstream := benchStream(b)
	first, rest, _, _ := EventStream.Cut(upstream)
	_, after, _, _ := EventStream.Cut(rest)
	delta := rest[:len(rest)-len(after)] // the first text delta's bytes
	tr := Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true})
	out, _ := tr.Event(nil, first)
	b.SetBytes(int64(len(delta)))
	b.ReportAllocs()
	for b.Loop() {
		event, _, ok, err := EventStream.Cut(delta)
		if err != nil || !ok {
			b.Fatal(err)
		}
		if out, err = tr.Event(out[:0], event); err != nil {
			b.Fatal(err)
		}
	}
}

// benchEmbedTexts are 96 texts of about 200 bytes: one Cohere call.
func benchEmbedTexts() []string {
	texts := make([]string, 96)
	for i := range texts {
		texts[i] = "Document " + strconv.Itoa(i) + ": " + strings.Repeat("a passage about foxes, whales and \"quoted\" words; ", 4)
	}
	return texts
}

// BenchmarkEmbeddingsRequest writes the InvokeModel requests for 96
// inputs: one Cohere call, and 96 Titan calls.
func BenchmarkEmbeddingsRequest(b *testing.B) {
	for _, model := range []string{"cohere.embed-v4:0", "amazon.titan-embed-text-v2:0"} {
		b.Run(model, func(b *testing.B) {
			req := providers.EmbeddingsRequest{Texts: benchEmbedTexts(), Dimensions: 1024}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := (Embeddings{}).EmbeddingsRequests(&req, model); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEmbeddingsResponse reads one Titan answer of 1024 values, and
// one Cohere answer of 96 vectors of 1024 values.
func BenchmarkEmbeddingsResponse(b *testing.B) {
	vector := func(seed int) []byte {
		v := []byte{'['}
		for i := range 1024 {
			if i > 0 {
				v = append(v, ',')
			}
			v = strconv.AppendFloat(v, float64(float32(seed*1024+i)/3e5-0.17), 'g', -1, 32)
		}
		return append(v, ']')
	}
	titan := append(append([]byte(`{"embedding":`), vector(0)...), `,"inputTextTokenCount":42}`...)
	cohere := []byte(`{"id":"x","embeddings":{"float":[`)
	for i := range 96 {
		if i > 0 {
			cohere = append(cohere, ',')
		}
		cohere = append(cohere, vector(i)...)
	}
	cohere = append(cohere, `]},"response_type":"embeddings_by_type","texts":[]}`...)
	h := http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"4032"}}
	for _, tc := range []struct {
		name string
		body []byte
	}{{"titan", titan}, {"cohere96", cohere}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.body)))
			b.ReportAllocs()
			for b.Loop() {
				var res providers.EmbeddingsResult
				if err := (Embeddings{}).EmbeddingsResponse(0, h, tc.body, &res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
