package gemini

import (
	"strconv"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// benchRequest is a realistic multi-turn request with tools and thinking,
// about 2.5 KB, with signed tool calls in its history.
var benchRequest = translatortest.TravelRequest{
	Model: "my-gemini",
	CallIDs: [3]string{"call_A09q90qw90lq917835lq9Abc__thought__CiQBf3b-_Yp1Q2kzY3cxMjM0NTY3ODkwYWJjZGVmZ2hpams",
		"call_B19q90qw90lq917835lq9Abc", "call_C29q90qw90lq917835lq9Abc"},
	Assistant: `, "thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "Ei8KLQFd1c+WZm9vYmFy"}]`,
	Params:    "  \"reasoning_effort\": \"low\",\n",
}.Body()

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
	translatortest.BenchChatRequest(b, benchRequest, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, "gemini-3-flash-preview")
	})
}

func BenchmarkChatResponse(b *testing.B) {
	translatortest.BenchResponse(b, []byte(benchResponse), Chat{}.ChatResponse)
}

// BenchmarkStream translates a 200-event stream; per event, divide by 200.
func BenchmarkStream(b *testing.B) {
	translatortest.Replay{New: Chat{}.ChatStream, Framing: Framing}.Bench(b, benchStream())
}

// BenchmarkStreamEvent translates one event of a stream.
func BenchmarkStreamEvent(b *testing.B) {
	event := []byte(`data: {"candidates":[{"content":{"parts":[{"text":"word 17 and a few more"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"candidatesTokenCount":51,"totalTokenCount":76},"modelVersion":"gemini-2.5-flash","responseId":"qjBbaOvHA7-Wz7IPl5CYuQ4"}`)
	translatortest.BenchEvent(b, Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true}), event, event)
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
