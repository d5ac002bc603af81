package translatortest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
)

// TravelRequest is the chat request the translators' benchmarks rewrite:
// a realistic multi-turn conversation of about 2 KB, a system prompt,
// three earlier tool calls and their results, three tools with JSON
// schemas, a streamed answer with usage.
type TravelRequest struct {
	// Model is the request's model, the gateway's alias.
	Model string
	// CallIDs are the ids of the three earlier tool calls, in the
	// provider's form.
	CallIDs [3]string
	// Assistant is JSON members added to the last assistant message
	// (", " first), e.g. its thinking_blocks.
	Assistant string
	// Params is JSON members added after max_completion_tokens, each on
	// a line of its own ending in ",".
	Params string
}

// Body returns the request's JSON.
func (r TravelRequest) Body() []byte {
	var b strings.Builder
	b.WriteString(`{
  "model": "` + r.Model + `",
  "messages": [
    {"role": "system", "content": "You are a travel assistant. Use the tools to look up facts; never guess weather or prices. Keep answers short and cite the tool you used."},
    {"role": "user", "content": "I'm flying from Paris to Tokyo next Tuesday. What's the weather like in both cities, and what time is it in Tokyo now?"},
    {"role": "assistant", "content": "Let me check that for you.", "tool_calls": [
      {"id": "` + r.CallIDs[0] + `", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}},
      {"id": "` + r.CallIDs[1] + `", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\", \"unit\": \"celsius\"}"}},
      {"id": "` + r.CallIDs[2] + `", "type": "function", "function": {"name": "get_time", "arguments": "{\"timezone\": \"Asia/Tokyo\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "` + r.CallIDs[0] + `", "content": "{\"temp\": 14, \"conditions\": \"light rain\", \"wind_kph\": 18}"},
    {"role": "tool", "tool_call_id": "` + r.CallIDs[1] + `", "content": "{\"temp\": 22, \"conditions\": \"sunny\", \"wind_kph\": 6}"},
    {"role": "tool", "tool_call_id": "` + r.CallIDs[2] + `", "content": "2026-08-14T21:05:00+09:00"},
    {"role": "assistant", "content": "Paris: 14°C with light rain. Tokyo: 22°C and sunny; it is 21:05 there now."` + r.Assistant + `},
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
`)
	b.WriteString(r.Params)
	b.WriteString(`  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "user-1234"
}`)
	return []byte(b.String())
}

// TextStream returns a stream of n text events between head and tail:
// event i is before, the decimal i, after.
func TextStream(head string, n int, before, after, tail string) []byte {
	b := []byte(head)
	for i := range n {
		b = append(b, before...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, after...)
	}
	return append(b, tail...)
}

// BenchChatRequest measures request, a translator's ChatRequest for the
// provider's model, rewriting body, which providers.ValidateChat must
// accept.
func BenchChatRequest(b *testing.B, body []byte, request func(body []byte) (providers.Request, error)) {
	if _, err := providers.ValidateChat(body); err != nil {
		b.Fatal(err)
	}
	BenchBody(b, body, request)
}

// BenchBody measures translate (a request's translation, say) on body,
// which it must not refuse.
func BenchBody[T any](b *testing.B, body []byte, translate func(body []byte) (T, error)) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := translate(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchResponse measures response, a translator's ChatResponse, on body,
// which it must not refuse.
func BenchResponse(b *testing.B, body []byte, response func(body []byte) ([]byte, providers.Used, error)) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := response(body); err != nil {
			b.Fatal(err)
		}
	}
}
