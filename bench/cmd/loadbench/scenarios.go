//go:build linux

package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/providers"
)

// The keys of the run. None is a secret: they exist only on loopback for
// the length of a run.
const (
	upstreamOpenAIKey    = "sk-loadbench-upstream"
	upstreamAnthropicKey = "sk-ant-loadbench-upstream"
	upstreamCohereKey    = "co-loadbench-upstream"
	gatewayKey           = "sk-loadbench-gateway-static-key"
)

// request is one HTTP request a client sends: to the gateway, or through
// plain reverse_proxy straight in the provider's own API.
type request struct {
	path   string
	header []string // name, value pairs
	body   []byte
}

// scenario is one kind of request, measured through every variant. A
// gateway variant gets the gateway request (the unified API, or the native
// API passed through); a plain reverse_proxy variant gets the request the
// client would send to the provider itself, which is what the gateway's
// translation sends upstream: so both get the same upstream answer, and
// the ratio is what the gateway adds to proxying the provider's own API.
type scenario struct {
	name string
	what string // one line for the report

	gateway request
	plain   request

	// stream: the answer is an event stream; events/s and the time to the
	// first event are measured.
	stream bool
	// expect is a string the first answer of a run must contain (checked
	// by the load generator), so that a run cannot measure an error page.
	expect string

	// upstream are the provider requests whose answers the canned upstream
	// records (the plain request's, and where the gateway asks the
	// provider something else, the gateway's).
	upstream []request
}

// words returns n distinct words, for prompts of a known length.
func words(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = "word" + strconv.Itoa(i)
	}
	return strings.Join(w, " ")
}

// streamWords is the prompt length whose OpenAI answer is a stream of 50
// events: the fake answers "echo: <prompt>", one chunk per word, after a
// role chunk, then a finish chunk, a usage chunk and [DONE] (45 words +
// "echo:" + 4 = 50).
const streamWords = 45

// pacedWords is the prompt of the slow streams (many-streams suite): 35
// words, so 40 events, one a second: a stream lasts 39 s, long enough for
// every stream to be open at once for a while after the last one opened.
const pacedWords = 35

// pacedModel is the model name the canned upstream paces: one event per
// -pace.
const pacedModel = "paced-gpt-4o-mini"

func chatBody(model, text string, stream bool) []byte {
	b := []byte(`{"model":`)
	b = providers.AppendString(b, model)
	b = append(b, `,"max_tokens":256,"temperature":0.2,`...)
	if stream {
		b = append(b, `"stream":true,"stream_options":{"include_usage":true},`...)
	}
	b = append(b, `"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":`...)
	b = providers.AppendString(b, text)
	return append(b, `}]}`...)
}

func messagesBody(model, text string, stream bool) []byte {
	b := []byte(`{"model":`)
	b = providers.AppendString(b, model)
	b = append(b, `,"max_tokens":256,"temperature":0.2,`...)
	if stream {
		b = append(b, `"stream":true,`...)
	}
	b = append(b, `"system":"You are a terse assistant.","messages":[{"role":"user","content":`...)
	b = providers.AppendString(b, text)
	return append(b, `}]}`...)
}

func rerankBody(model string, docs int) []byte {
	b := []byte(`{"model":`)
	b = providers.AppendString(b, model)
	b = append(b, `,"query":"which document talks about word7 and word42","top_n":10,"documents":[`...)
	for i := range docs {
		if i > 0 {
			b = append(b, ',')
		}
		// ~60 words each, a few of them shared with the query.
		b = providers.AppendString(b, fmt.Sprintf("document %d mentions word%d and word%d; %s", i, i%50, (i*7)%60, words(55)))
	}
	return append(b, `]}`...)
}

func embeddingsBody(model string, inputs int, format string) []byte {
	b := []byte(`{"model":`)
	b = providers.AppendString(b, model)
	b = append(b, `,"dimensions":1536,"encoding_format":`...)
	b = providers.AppendString(b, format)
	b = append(b, `,"input":[`...)
	for i := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		b = providers.AppendString(b, fmt.Sprintf("input %d: %s", i, words(30)))
	}
	return append(b, `]}`...)
}

func responsesBody(model, text string) []byte {
	b := []byte(`{"model":`)
	b = providers.AppendString(b, model)
	b = append(b, `,"max_output_tokens":256,"instructions":"You are a terse assistant.","input":`...)
	b = providers.AppendString(b, text)
	return append(b, '}')
}

var (
	bearerGateway   = []string{"Authorization", "Bearer " + gatewayKey}
	bearerOpenAI    = []string{"Authorization", "Bearer " + upstreamOpenAIKey}
	bearerCohere    = []string{"Authorization", "Bearer " + upstreamCohereKey}
	anthropicNative = []string{"X-Api-Key", upstreamAnthropicKey, "Anthropic-Version", "2023-06-01"}
	anthropicViaGW  = []string{"X-Api-Key", gatewayKey, "Anthropic-Version", "2023-06-01"}
)

const prompt = "Summarise the plot of Hamlet in one sentence please"

// scenarios are the live suite's scenarios, in report order.
func scenarios() []*scenario {
	chatPlain := request{"/v1/chat/completions", bearerOpenAI, chatBody("gpt-4o-mini", prompt, false)}
	anthropicPlain := request{"/v1/messages", anthropicNative, messagesBody("claude-sonnet-4-5", prompt, false)}
	streamPlain := request{"/v1/chat/completions", bearerOpenAI, chatBody("gpt-4o-mini", words(streamWords), true)}
	streamAnthropicPlain := request{"/v1/messages", anthropicNative, messagesBody("claude-sonnet-4-5", words(streamWords), true)}
	rerankPlain := request{"/cohere/v2/rerank", bearerCohere, rerankBody("rerank-v3.5", 100)}
	embPlain := request{"/v1/embeddings", bearerOpenAI, embeddingsBody("text-embedding-3-small", 64, "base64")}
	embUpstream := request{"/v1/embeddings", bearerOpenAI, embeddingsBody("text-embedding-3-small", 64, "float")}
	respPlain := request{"/v1/responses", bearerOpenAI, responsesBody("gpt-4o-mini", prompt)}
	msgPlain := request{"/v1/messages", anthropicNative, messagesBody("claude-sonnet-4-5", prompt, false)}
	return []*scenario{
		{
			name: "chat", what: "chat completion, OpenAI pass-through (non-streamed)",
			gateway: request{"/v1/chat/completions", bearerGateway, chatBody("oa/gpt-4o-mini", prompt, false)},
			plain:   chatPlain, expect: `"echo: Summarise`, upstream: []request{chatPlain},
		},
		{
			name: "anthropic", what: "chat completion, OpenAI→Anthropic translation (plain: the Messages request itself)",
			gateway: request{"/v1/chat/completions", bearerGateway, chatBody("claude/claude-sonnet-4-5", prompt, false)},
			plain:   anthropicPlain, expect: `echo: Summarise`, upstream: []request{anthropicPlain},
		},
		{
			name: "stream", what: "streamed chat completion of 50 events, OpenAI pass-through",
			gateway: request{"/v1/chat/completions", bearerGateway, chatBody("oa/gpt-4o-mini", words(streamWords), true)},
			plain:   streamPlain, stream: true, expect: `[DONE]`, upstream: []request{streamPlain},
		},
		{
			name: "stream_anthropic", what: "streamed chat completion translated from Anthropic's stream (plain: the Messages stream itself)",
			gateway: request{"/v1/chat/completions", bearerGateway, chatBody("claude/claude-sonnet-4-5", words(streamWords), true)},
			plain:   streamAnthropicPlain, stream: true, expect: `word44`, upstream: []request{streamAnthropicPlain},
		},
		{
			name: "rerank", what: "rerank of 100 documents (~60 words each), Cohere",
			gateway: request{"/v1/rerank", bearerGateway, rerankBody("co/rerank-v3.5", 100)},
			plain:   rerankPlain, expect: `relevance_score`, upstream: []request{rerankPlain},
		},
		{
			name: "embeddings", what: "embeddings of 64 inputs, 1536 dimensions, base64 (the OpenAI SDKs' default; the gateway asks the provider for base64 and checks it)",
			gateway: request{"/v1/embeddings", bearerGateway, embeddingsBody("oa/text-embedding-3-small", 64, "base64")},
			plain:   embPlain, expect: `"embedding"`, upstream: []request{embPlain, embUpstream},
		},
		{
			name: "responses", what: "Responses API request, passed through to OpenAI (store on: the gateway records a pointer)",
			gateway: request{"/v1/responses", bearerGateway, responsesBody("oa/gpt-4o-mini", prompt)},
			plain:   respPlain, expect: `echo: Summarise`, upstream: []request{respPlain},
		},
		{
			name: "messages", what: "Messages API request, passed through to Anthropic",
			gateway: request{"/v1/messages", anthropicViaGW, messagesBody("claude/claude-sonnet-4-5", prompt, false)},
			plain:   msgPlain, expect: `echo: Summarise`, upstream: []request{msgPlain},
		},
	}
}

// pacedScenario is the many-streams suite's slow stream: one event per
// -pace from the upstream, 15 events.
func pacedScenario() *scenario {
	plain := request{"/v1/chat/completions", bearerOpenAI, chatBody(pacedModel, words(pacedWords), true)}
	return &scenario{
		name: "paced_stream", what: "slow stream, one event a second",
		gateway: request{"/v1/chat/completions", bearerGateway, chatBody("oa/"+pacedModel, words(pacedWords), true)},
		plain:   plain, stream: true, expect: "[DONE]", upstream: []request{plain},
	}
}

// batchLine is one line of the batch suite's input file: the chat
// scenario's request.
func batchLine(i int) []byte {
	b := []byte(`{"custom_id":"req-`)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `","method":"POST","url":"/v1/chat/completions","body":`...)
	b = append(b, chatBody("oa/gpt-4o-mini", prompt, false)...)
	return append(b, '}')
}

// allUpstreamRequests are the requests whose answers the canned upstream
// records.
func allUpstreamRequests() []request {
	var out []request
	for _, s := range append(scenarios(), pacedScenario()) {
		out = append(out, s.upstream...)
	}
	return out
}
