package bedrock

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// benchRequest is a realistic multi-turn request with tools, about 2 KB.
var benchRequest = translatortest.TravelRequest{
	Model:   "my-claude",
	CallIDs: [3]string{"tooluse_01A09q90qw90lq917835lq9", "tooluse_01B19q90qw90lq917835lq9", "tooluse_01C29q90qw90lq917835lq9"},
}.Body()

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
	translatortest.BenchChatRequest(b, benchRequest, func(body []byte) (providers.Request, error) {
		return Chat{}.ChatRequest(body, testModel)
	})
}

func BenchmarkChatResponse(b *testing.B) {
	translatortest.BenchResponse(b, []byte(benchResponse), Chat{}.ChatResponse)
}

// BenchmarkStream translates a whole 200-event answer, cutting each event
// with EventStream as the gateway does.
func BenchmarkStream(b *testing.B) {
	translatortest.Replay{New: Chat{}.ChatStream, Framing: EventStream}.Bench(b, benchStream(b))
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
