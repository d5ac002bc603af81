package anthropic

import (
	"strconv"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/sse"
)

// benchRequest is a realistic multi-turn request with tools, about 2 KB.
const benchRequest = `{
  "model": "my-claude",
  "messages": [
    {"role": "system", "content": "You are a travel assistant. Use the tools to look up facts; never guess weather or prices. Keep answers short and cite the tool you used."},
    {"role": "user", "content": "I'm flying from Paris to Tokyo next Tuesday. What's the weather like in both cities, and what time is it in Tokyo now?"},
    {"role": "assistant", "content": "Let me check that for you.", "tool_calls": [
      {"id": "toolu_01A09q90qw90lq917835lq9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
      {"id": "toolu_01B19q90qw90lq917835lq9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}"}},
      {"id": "toolu_01C29q90qw90lq917835lq9", "type": "function", "function": {"name": "get_time", "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "toolu_01A09q90qw90lq917835lq9", "content": "{\"temp\": 14, \"conditions\": \"light rain\", \"wind_kph\": 18}"},
    {"role": "tool", "tool_call_id": "toolu_01B19q90qw90lq917835lq9", "content": "{\"temp\": 22, \"conditions\": \"sunny\", \"wind_kph\": 6}"},
    {"role": "tool", "tool_call_id": "toolu_01C29q90qw90lq917835lq9", "content": "2026-08-14T21:05:00+09:00"},
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

const benchResponse = `{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
	`"content":[{"type":"text","text":"I'll search flights from CDG to HND for Tuesday in economy for one adult, and compare the cheapest options."},` +
	`{"type":"tool_use","id":"toolu_01D39q90qw90lq917835lq9","name":"search_flights","input":{"from":"CDG","to":"HND","date":"2026-08-18","cabin":"economy","adults":1}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1204,"cache_read_input_tokens":512,"output_tokens":96}}`

// benchStream is a 200-event text stream.
func benchStream() []byte {
	b := []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range 195 {
		b = append(b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word "...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, " and a few more\"}}\n\n"...)
	}
	return append(b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":600}}\n\n"+
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
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
		if _, err := c.ChatRequest(body, "claude-sonnet-4-5-20250929"); err != nil {
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

// BenchmarkStreamThinkingTools translates the thinking_tools transcript:
// thinking, a signature, text and four tool calls.
func BenchmarkStreamThinkingTools(b *testing.B) {
	upstream, _, _ := translatortest.ReadTranscript(b, sseDir+"/thinking_tools_include_usage.txt")
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

// BenchmarkChatRequestStructured translates a request with reasoning and a
// json_schema response_format for a model with native JSON outputs.
func BenchmarkChatRequestStructured(b *testing.B) {
	body := translatortest.ReadFile(b, requestDir+"/json_schema_native.unified.json")
	c := Chat{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ChatRequest(body, "claude-opus-4-7"); err != nil {
			b.Fatal(err)
		}
	}
}
