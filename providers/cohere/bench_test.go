package cohere

import (
	"strconv"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/sse"
)

// benchRequest is a realistic multi-turn request with tools, about 2 KB.
const benchRequest = `{
  "model": "my-command",
  "messages": [
    {"role": "system", "content": "You are a travel assistant. Use the tools to look up facts; never guess weather or prices. Keep answers short and cite the tool you used."},
    {"role": "user", "content": "I'm flying from Paris to Tokyo next Tuesday. What's the weather like in both cities, and what time is it in Tokyo now?"},
    {"role": "assistant", "content": "Let me check that for you.", "tool_calls": [
      {"id": "get_weather_1byjy32y4hvq", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
      {"id": "get_weather_n9nt3ftyy1p4", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}"}},
      {"id": "get_time_0a1b2c3d4e5f", "type": "function", "function": {"name": "get_time", "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "get_weather_1byjy32y4hvq", "content": "{\"temp\": 14, \"conditions\": \"light rain\", \"wind_kph\": 18}"},
    {"role": "tool", "tool_call_id": "get_weather_n9nt3ftyy1p4", "content": "{\"temp\": 22, \"conditions\": \"sunny\", \"wind_kph\": 6}"},
    {"role": "tool", "tool_call_id": "get_time_0a1b2c3d4e5f", "content": "2026-08-14T21:05:00+09:00"},
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
  "top_p": 1,
  "max_completion_tokens": 1024,
  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "user-1234"
}`

const benchResponse = `{"id":"fba98ad3-e5a1-413c-a8de-84fbf9baabf7","finish_reason":"TOOL_CALL",` +
	`"message":{"role":"assistant","tool_plan":"I will search flights from CDG to HND for Tuesday in economy for one adult, and compare the cheapest options.",` +
	`"tool_calls":[{"id":"search_flights_x7y8z9a0b1c2","type":"function","function":{"name":"search_flights","arguments":"{\"from\":\"CDG\",\"to\":\"HND\",\"date\":\"2026-08-18\",\"cabin\":\"economy\",\"adults\":1}"}}]},` +
	`"usage":{"billed_units":{"input_tokens":420,"output_tokens":61},"tokens":{"input_tokens":1204,"output_tokens":96},"cached_tokens":512}}`

// benchStream is a 200-event text stream in Cohere's framing.
func benchStream() []byte {
	b := []byte("event: message-start\ndata: {\"id\":\"c14c80c3-18eb-4519-9460-6c92edd8cfb4\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\",\"content\":[],\"tool_plan\":\"\",\"tool_calls\":[],\"citations\":[]}}}\n\n" +
		"event: content-start\ndata: {\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"type\":\"text\",\"text\":\"\"}}}}\n\n")
	for i := range 195 {
		b = append(b, "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"word "...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, " and a few more\"}}}}\n\n"...)
	}
	return append(b, "event: content-end\ndata: {\"type\":\"content-end\",\"index\":0}\n\n"+
		"event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"COMPLETE\",\"usage\":{\"billed_units\":{\"input_tokens\":5,\"output_tokens\":600},\"tokens\":{\"input_tokens\":496,\"output_tokens\":600}}}}\n\n"+
		"data: [DONE]\n\n"...)
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
		if _, err := c.ChatRequest(body, "command-a-03-2025"); err != nil {
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

// BenchmarkStream translates a whole 200-event stream per iteration.
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
			event, rest, ok := sse.Cut(buf)
			if !ok {
				break
			}
			var err error
			if out, err = tr.Event(out, event); err != nil {
				b.Fatal(err)
			}
			buf = rest
		}
		out = tr.Close(out)
	}
}

// BenchmarkStreamEvent translates one content-delta event.
func BenchmarkStreamEvent(b *testing.B) {
	event := []byte("event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\" and a few more words\"}}}}")
	tr := Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true})
	out, err := tr.Event(nil, []byte(`data: {"id":"c14c80c3-18eb-4519-9460-6c92edd8cfb4","type":"message-start"}`))
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

// benchEmbedTexts are 96 texts of about 300 bytes, one full Cohere request.
func benchEmbedTexts() []string {
	texts := make([]string, MaxEmbedTexts)
	for i := range texts {
		texts[i] = "Passage " + strconv.Itoa(i) + ": the red fox lives at the edge of the forest, hunting at dawn and dusk; " +
			"its den is dug under roots, and the cubs stay there for weeks. \"Foxes\" adapt to towns as well, where they eat what people leave."
	}
	return texts
}

// BenchmarkEmbeddingsRequest writes one request of 96 texts.
func BenchmarkEmbeddingsRequest(b *testing.B) {
	req := &providers.EmbeddingsRequest{Model: "my-embed", Texts: benchEmbedTexts(), Dimensions: 1024, InputType: "query"}
	size := 0
	for _, t := range req.Texts {
		size += len(t)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (Embeddings{}).EmbeddingsRequests(req, "embed-v4.0"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmbeddingsResponse reads one answer of 96 vectors of 1,024
// floats, as Cohere prints them.
func BenchmarkEmbeddingsResponse(b *testing.B) {
	body := []byte(`{"id":"da6e531f-54c6-4a73-bf92-f60566d8d753","embeddings":{"float":[`)
	for i := range MaxEmbedTexts {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, '[')
		for j := range 1024 {
			if j > 0 {
				body = append(body, ',')
			}
			body = strconv.AppendFloat(body, float64(float32(j-512)/float32(4096+i)), 'g', -1, 32)
		}
		body = append(body, ']')
	}
	body = append(body, `]},"texts":[],"meta":{"api_version":{"version":"2"},"billed_units":{"input_tokens":5400}}}`...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		res := providers.EmbeddingsResult{Vectors: make([][]float32, 0, MaxEmbedTexts)}
		if err := (Embeddings{}).EmbeddingsResponse(0, nil, body, &res); err != nil || len(res.Vectors) != MaxEmbedTexts {
			b.Fatal(err)
		}
	}
}
