package cohere

import (
	"strconv"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// benchRequest is a realistic multi-turn request with tools, about 2 KB.
var benchRequest = translatortest.TravelRequest{
	Model:   "my-command",
	CallIDs: [3]string{"get_weather_1byjy32y4hvq", "get_weather_n9nt3ftyy1p4", "get_time_0a1b2c3d4e5f"},
	Params:  "  \"top_p\": 1,\n",
}.Body()

const benchResponse = `{"id":"fba98ad3-e5a1-413c-a8de-84fbf9baabf7","finish_reason":"TOOL_CALL",` +
	`"message":{"role":"assistant","tool_plan":"I will search flights from CDG to HND for Tuesday in economy for one adult, and compare the cheapest options.",` +
	`"tool_calls":[{"id":"search_flights_x7y8z9a0b1c2","type":"function","function":{"name":"search_flights","arguments":"{\"from\":\"CDG\",\"to\":\"HND\",\"date\":\"2026-08-18\",\"cabin\":\"economy\",\"adults\":1}"}}]},` +
	`"usage":{"billed_units":{"input_tokens":420,"output_tokens":61},"tokens":{"input_tokens":1204,"output_tokens":96},"cached_tokens":512}}`

// benchStream is a 200-event text stream in Cohere's framing.
func benchStream() []byte {
	return translatortest.TextStream("event: message-start\ndata: {\"id\":\"c14c80c3-18eb-4519-9460-6c92edd8cfb4\",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":\"assistant\",\"content\":[],\"tool_plan\":\"\",\"tool_calls\":[],\"citations\":[]}}}\n\n"+
		"event: content-start\ndata: {\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"type\":\"text\",\"text\":\"\"}}}}\n\n",
		195, "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"word ", " and a few more\"}}}}\n\n",
		"event: content-end\ndata: {\"type\":\"content-end\",\"index\":0}\n\n"+
			"event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"COMPLETE\",\"usage\":{\"billed_units\":{\"input_tokens\":5,\"output_tokens\":600},\"tokens\":{\"input_tokens\":496,\"output_tokens\":600}}}}\n\n"+
			"data: [DONE]\n\n")
}

func BenchmarkChatRequest(b *testing.B) {
	translatortest.BenchChatRequest(b, benchRequest, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, "command-a-03-2025")
	})
}

func BenchmarkChatResponse(b *testing.B) {
	translatortest.BenchResponse(b, []byte(benchResponse), Chat{}.ChatResponse)
}

// BenchmarkStream translates a whole 200-event stream per iteration.
func BenchmarkStream(b *testing.B) {
	translatortest.Replay{New: Chat{}.ChatStream}.Bench(b, benchStream())
}

// BenchmarkStreamEvent translates one content-delta event.
func BenchmarkStreamEvent(b *testing.B) {
	translatortest.BenchEvent(b, Chat{}.ChatStream(providers.StreamOptions{IncludeUsage: true}),
		[]byte(`data: {"id":"c14c80c3-18eb-4519-9460-6c92edd8cfb4","type":"message-start"}`),
		[]byte("event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\" and a few more words\"}}}}"))
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
