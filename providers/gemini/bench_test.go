package gemini

import (
	"strconv"
	"testing"

	"github.com/modelgate/modelgate/providers"
)

// benchRequest is a realistic multi-turn request with tools and thinking,
// about 2.5 KB, with signed tool calls in its history.
const benchRequest = `{
  "model": "my-gemini",
  "messages": [
    {"role": "system", "content": "You are a travel assistant. Use the tools to look up facts; never guess weather or prices. Keep answers short and cite the tool you used."},
    {"role": "user", "content": "I'm flying from Paris to Tokyo next Tuesday. What's the weather like in both cities, and what time is it in Tokyo now?"},
    {"role": "assistant", "content": "Let me check that for you.", "tool_calls": [
      {"id": "call_A09q90qw90lq917835lq9Abc__thought__CiQBf3b-_Yp1Q2kzY3cxMjM0NTY3ODkwYWJjZGVmZ2hpams", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
      {"id": "call_B19q90qw90lq917835lq9Abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}"}},
      {"id": "call_C29q90qw90lq917835lq9Abc", "type": "function", "function": {"name": "get_time", "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_A09q90qw90lq917835lq9Abc__thought__CiQBf3b-_Yp1Q2kzY3cxMjM0NTY3ODkwYWJjZGVmZ2hpams", "content": "{\"temp\": 14, \"conditions\": \"light rain\", \"wind_kph\": 18}"},
    {"role": "tool", "tool_call_id": "call_B19q90qw90lq917835lq9Abc", "content": "{\"temp\": 22, \"conditions\": \"sunny\", \"wind_kph\": 6}"},
    {"role": "tool", "tool_call_id": "call_C29q90qw90lq917835lq9Abc", "content": "2026-08-14T21:05:00+09:00"},
    {"role": "assistant", "content": "Paris: 14°C with light rain. Tokyo: 22°C and sunny; it is 21:05 there now.", "thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "Ei8KLQFd1c+WZm9vYmFy"}]},
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
  "reasoning_effort": "low",
  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "user-1234"
}`

const benchResponse = `{"candidates":[{"content":{"role":"model","parts":[` +
	`{"text":"The user wants a flight search; I have all the fields.","thought":true},` +
	`{"text":"I'll search flights from CDG to HND for Tuesday in economy for one adult, and compare the cheapest options."},` +
	`{"functionCall":{"name":"search_flights","args":{"from":"CDG","to":"HND","date":"2026-08-18","cabin":"economy","adults":1}},"thoughtSignature":"CiQBf3b+/Yp1Q2kzY3cxMjM0NTY3ODkwYWJjZGVmZ2hpams="}]},` +
	`"finishReason":"STOP","index":0}],` +
	`"usageMetadata":{"promptTokenCount":1204,"candidatesTokenCount":64,"totalTokenCount":1300,"cachedContentTokenCount":512,"thoughtsTokenCount":32,"promptTokensDetails":[{"modality":"TEXT","tokenCount":1204}]},` +
	`"modelVersion":"gemini-3-flash-preview","responseId":"7DBbaJ6XAq-Wz7IP4sCYoQo"}`

// benchStream is a 200-event text stream in Gemini's framing.
func benchStream() []byte {
	var b []byte
	for i := range 199 {
		b = append(b, `data: {"candidates":[{"content":{"parts":[{"text":"word `...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ` and a few more"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(3*i), 10)
		b = append(b, `,"totalTokenCount":`...)
		b = strconv.AppendInt(b, int64(25+3*i), 10)
		b = append(b, "},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"qjBbaOvHA7-Wz7IPl5CYuQ4\"}\r\n\r\n"...)
	}
	return append(b, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\".\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":25,\"candidatesTokenCount\":600,\"totalTokenCount\":625},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"qjBbaOvHA7-Wz7IPl5CYuQ4\"}\r\n\r\n"...)
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
		if _, err := c.ChatRequest(body, "gemini-3-flash-preview"); err != nil {
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

// BenchmarkStream translates a 200-event stream; per event, divide by 200.
func BenchmarkStream(b *testing.B) {
	upstream := benchStream()
	c := Chat{}
	out := make([]byte, 0, 4*len(upstream))
	b.SetBytes(int64(len(upstream)))
	b.ReportAllocs()
	for b.Loop() {
		tr := c.ChatStream(providers.StreamOptions{IncludeUsage: true})
		out = out[:0]
		buf := upstream
		for {
			event, rest, ok, err := Framing.Cut(buf)
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

// BenchmarkStreamEvent translates one event of a stream.
func BenchmarkStreamEvent(b *testing.B) {
	event := []byte(`data: {"candidates":[{"content":{"parts":[{"text":"word 17 and a few more"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"candidatesTokenCount":51,"totalTokenCount":76},"modelVersion":"gemini-2.5-flash","responseId":"qjBbaOvHA7-Wz7IPl5CYuQ4"}`)
	tr := Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true})
	out, err := tr.Event(nil, event)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err = tr.Event(out[:0], event); err != nil {
			b.Fatal(err)
		}
	}
}

// benchEmbeddings is the gateway's own work for one embeddings request of
// 64 inputs: writing the provider's requests, reading its answer of
// decimal numbers (dims values each), writing the base64 answer.
func benchEmbeddings(b *testing.B, e Embeddings, model string, dims int) {
	req := &providers.EmbeddingsRequest{Model: "m", Base64: true, InputType: "document"}
	var answer []byte
	if e.Vertex {
		answer = append(answer, `{"predictions":[`...)
	} else {
		answer = append(answer, `{"embeddings":[`...)
	}
	for i := range 64 {
		req.Texts = append(req.Texts, "the quick brown fox jumps over the lazy dog")
		if i > 0 {
			answer = append(answer, ',')
		}
		if e.Vertex {
			answer = append(answer, `{"embeddings":{"statistics":{"truncated":false,"token_count":9},"values":[`...)
		} else {
			answer = append(answer, `{"values":[`...)
		}
		for j := range dims {
			if j > 0 {
				answer = append(answer, ',')
			}
			answer = append(answer, "-0.0072897403"...)
		}
		answer = append(answer, "]}"...)
		if e.Vertex {
			answer = append(answer, '}')
		}
	}
	answer = append(answer, "]}"...)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.EmbeddingsRequests(req, model); err != nil {
			b.Fatal(err)
		}
		var res providers.EmbeddingsResult
		if err := e.EmbeddingsResponse(0, nil, answer, &res); err != nil {
			b.Fatal(err)
		}
		if _, ok := providers.EmbeddingsAnswer(nil, req, &res); !ok {
			b.Fatal("answer")
		}
	}
}

func BenchmarkEmbeddingsGemini64x3072(b *testing.B) {
	benchEmbeddings(b, Embeddings{}, "gemini-embedding-001", 3072)
}

func BenchmarkEmbeddingsVertexPredict64x768(b *testing.B) {
	benchEmbeddings(b, Embeddings{Chat{Vertex: true, Project: "p", Location: "us-central1"}}, "text-embedding-005", 768)
}
