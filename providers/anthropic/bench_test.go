package anthropic

import (
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// benchRequest is a realistic multi-turn request with tools, about 2 KB.
var benchRequest = translatortest.TravelRequest{
	Model:   "my-claude",
	CallIDs: [3]string{"toolu_01A09q90qw90lq917835lq9", "toolu_01B19q90qw90lq917835lq9", "toolu_01C29q90qw90lq917835lq9"},
}.Body()

const benchResponse = `{"id":"msg_01Aq9w938a90dw8q","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
	`"content":[{"type":"text","text":"I'll search flights from CDG to HND for Tuesday in economy for one adult, and compare the cheapest options."},` +
	`{"type":"tool_use","id":"toolu_01D39q90qw90lq917835lq9","name":"search_flights","input":{"from":"CDG","to":"HND","date":"2026-08-18","cabin":"economy","adults":1}}],` +
	`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1204,"cache_read_input_tokens":512,"output_tokens":96}}`

// benchStream is a 200-event text stream.
func benchStream() []byte {
	return translatortest.TextStream("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"+
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		195, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word ", " and a few more\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":600}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

func BenchmarkChatRequest(b *testing.B) {
	translatortest.BenchChatRequest(b, benchRequest, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, "claude-sonnet-4-5-20250929")
	})
}

func BenchmarkChatResponse(b *testing.B) {
	translatortest.BenchResponse(b, []byte(benchResponse), Chat{}.ChatResponse)
}

func BenchmarkStream(b *testing.B) {
	translatortest.Replay{New: Chat{}.ChatStream}.Bench(b, benchStream())
}

// BenchmarkStreamThinkingTools translates the thinking_tools transcript:
// thinking, a signature, text and four tool calls.
func BenchmarkStreamThinkingTools(b *testing.B) {
	upstream, _, _ := translatortest.ReadTranscript(b, sseDir+"/thinking_tools_include_usage.txt")
	translatortest.Replay{New: Chat{}.ChatStream}.Bench(b, upstream)
}

// BenchmarkChatRequestStructured translates a request with reasoning and a
// json_schema response_format for a model with native JSON outputs.
func BenchmarkChatRequestStructured(b *testing.B) {
	body := translatortest.ReadFile(b, requestDir+"/json_schema_native.unified.json")
	translatortest.BenchChatRequest(b, body, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, "claude-opus-4-7")
	})
}

// BenchmarkChatRequestShort translates a short chat, a system and a user
// message: what most requests are, and the load harness's.
func BenchmarkChatRequestShort(b *testing.B) {
	body := []byte(`{"model":"claude","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in one word."}],"max_tokens":64}`)
	translatortest.BenchChatRequest(b, body, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, "claude-sonnet-4-5-20250929")
	})
}
