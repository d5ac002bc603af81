package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providertest"
)

// TestIntegrationEmbeddings sends embeddings through every provider type
// that serves them with the OpenAI SDK, which decodes base64 itself: every
// value of every vector, as float32, is the provider's exactly, in both
// encodings, with the dimensions asked for; usage counts; token-id inputs
// where the provider takes them; a batch of embeddings lines.
func TestIntegrationEmbeddings(t *testing.T) {
	fake, _ := startProviders(t)
	c := sdk(aliceKey)
	ctx := context.Background()
	texts := []string{"the red fox", "a blue whale swims far", "ünïcødé \"quoted\""}
	for _, tc := range []struct {
		model  string
		dims   int64 // 0: the provider's own
		tokens bool  // takes token ids
	}{
		{"openai/text-embedding-3-small", 256, true},
		{"azure/text-embedding-3-large", 32, true},
		{"azure_v1/prod-embed", 0, true},
		{"azure_entra/prod-embed", 0, true},
		{"vllm/bge-m3", 16, true},
		{"ollama/nomic-embed-text", 8, false},
		{"infinity/bge-small", 0, false},
		{"together/m2-bert", 0, false},
		{"tei/bge-base", 0, false},
		{"mistral/mistral-embed", 128, false},
		{"voyage/voyage-3.5", 512, false},
		{"jina/jina-embeddings-v3", 64, false},
		{"bedrock/amazon.titan-embed-text-v2:0", 256, false},
		{"bedrock_env/cohere.embed-v4:0", 1024, false},
		{"bedrock_apikey/us.cohere.embed-v4:0", 512, false},
		{"cohere/embed-v4.0", 256, false},
		{"cohere/embed-english-v3.0", 0, false},
		{"gemini/gemini-embedding-001", 256, false},
		{"vertex/text-embedding-005", 32, false},
		{"vertex/gemini-embedding-001", 0, false},
		{"vertex/gemini-embedding-2-preview", 8, false},
		{"embed-fallback", 0, true},
	} {
		t.Run(tc.model, func(t *testing.T) {
			for _, enc := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatBase64, openai.EmbeddingNewParamsEncodingFormatFloat} {
				p := openai.EmbeddingNewParams{Model: tc.model, EncodingFormat: enc,
					Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}}
				if tc.dims > 0 {
					p.Dimensions = openai.Int(tc.dims)
				}
				res, err := c.Embeddings.New(ctx, p)
				if err != nil {
					t.Fatalf("%s: %v", enc, err)
				}
				dims := int(tc.dims)
				if dims == 0 {
					dims = providertest.EmbeddingDims
				}
				tokens := int64(10)
				if strings.HasPrefix(tc.model, "gemini/") {
					// Gemini's Developer API reports no usage: the answer
					// carries the gateway's estimate, never 0.
					tokens = (&providers.EmbeddingsRequest{Texts: texts}).EstimateTokens()
				}
				if len(res.Data) != len(texts) || res.Model != tc.model || res.Usage.PromptTokens != tokens || res.Usage.TotalTokens != tokens {
					t.Fatalf("%s: %d vectors, model %q, usage %+v", enc, len(res.Data), res.Model, res.Usage)
				}
				if raw := res.Data[0].JSON.Embedding.Raw(); (enc == "base64") != strings.HasPrefix(raw, `"`) {
					t.Fatalf("%s asked, got %.40s", enc, raw)
				}
				for i, d := range res.Data {
					want := providertest.EmbeddingVector(texts[i], dims)
					if d.Index != int64(i) || len(d.Embedding) != len(want) {
						t.Fatalf("%s: item %d index %d, %d values, want %d", enc, i, d.Index, len(d.Embedding), len(want))
					}
					for j, v := range d.Embedding {
						// base64 carries the float32 itself; a decimal number
						// parses to the float64 nearest it, which converts
						// back to that float32.
						exact := enc != "base64" || float64(float32(v)) == v
						if math.Float32bits(float32(v)) != math.Float32bits(want[j]) || !exact {
							t.Fatalf("%s: vector %d value %d is %v, the provider's is %v", enc, i, j, v, want[j])
						}
					}
				}
			}
			if tc.tokens {
				res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: tc.model,
					Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}, {3}}}})
				if err != nil || len(res.Data) != 2 || float32(res.Data[1].Embedding[0]) != providertest.EmbeddingVector("tok3", providertest.EmbeddingDims)[0] {
					t.Fatalf("token ids: %v", err)
				}
			}
		})
	}

	t.Run("refused where the provider cannot", func(t *testing.T) {
		var apiErr *openai.Error
		_, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "tei/bge", Dimensions: openai.Int(8),
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" || apiErr.Param != "dimensions" {
			t.Errorf("tei dimensions: %v", err)
		}
		_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "cohere/embed-v4.0", Dimensions: openai.Int(768),
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" || apiErr.Param != "dimensions" {
			t.Errorf("cohere dimensions 768: %v", err)
		}
		_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "cohere/embed-v4.0",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}}}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" || apiErr.Param != "input (token ids)" {
			t.Errorf("cohere token ids: %v", err)
		}
		_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "gemini/gemini-embedding-001",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{{1, 2}}}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_parameter" || apiErr.Param != "input (token ids)" {
			t.Errorf("gemini token ids: %v", err)
		}
		_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "anthropic/claude",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "unsupported_endpoint" {
			t.Errorf("a chat-only provider: %v", err)
		}
		_, err = c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "openai/m",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", ""}}})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input[1]" {
			t.Errorf("an empty input: %v", err)
		}
	})

	t.Run("input_type reaches the providers that take one", func(t *testing.T) {
		for _, tc := range []struct{ model, inputType, field, want string }{
			{"voyage/voyage-3.5", `"query"`, "input_type", "query"},
			{"jina/jina-embeddings-v3", `"query"`, "task", "retrieval.query"},
			{"cohere/embed-v4.0", `"query"`, "input_type", "search_query"},
			{"cohere/embed-v4.0", `"document"`, "input_type", "search_document"},
			{"cohere/embed-v4.0", `null`, "input_type", "search_document"}, // Cohere requires one
			{"cohere/embed-v4.0", `"classification"`, "input_type", "classification"},
			{"bedrock/cohere.embed-v4:0", `"query"`, "input_type", "search_query"},
			{"bedrock/cohere.embed-v4:0", `null`, "input_type", "search_document"},
			{"gemini/gemini-embedding-001", `"query"`, "requests.0.taskType", "RETRIEVAL_QUERY"},
			{"gemini/gemini-embedding-001", `"CLUSTERING"`, "requests.0.taskType", "CLUSTERING"},
			{"vertex/text-embedding-005", `"document"`, "instances.0.task_type", "RETRIEVAL_DOCUMENT"},
			{"vertex/gemini-embedding-2-preview", `"query"`, "embedContentConfig.taskType", "RETRIEVAL_QUERY"},
		} {
			before := len(fake.Requests())
			status, body, _ := request(t, "POST", gatewayBase+"/v1/embeddings",
				`{"model":"`+tc.model+`","input":"q","input_type":`+tc.inputType+`}`, "Authorization", "Bearer "+aliceKey)
			sent := fake.Requests()[before:]
			if status != 200 || len(sent) != 1 {
				t.Fatalf("%d %s", status, body)
			}
			if got := gjson.GetBytes(sent[0].Body, tc.field).Str; got != tc.want {
				t.Errorf("%s with input_type %s sent %s=%q, want %q", tc.model, tc.inputType, tc.field, got, tc.want)
			}
		}
	})

	t.Run("cohere: more inputs than a Cohere request holds", func(t *testing.T) {
		// Cohere embeds at most 96 texts a request: 200 inputs go out as
		// three requests and come back as one answer, in input order.
		inputs := make([]string, 200)
		words := int64(0)
		for i := range inputs {
			inputs[i] = fmt.Sprintf("passage %d", i) + strings.Repeat(" fox", i%3)
			words += int64(2 + i%3)
		}
		before := len(fake.Requests())
		res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "cohere/embed-v4.0", Dimensions: openai.Int(512),
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}})
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for _, r := range fake.Requests()[before:] {
			sizes = append(sizes, len(gjson.GetBytes(r.Body, "texts").Array()))
		}
		if fmt.Sprint(sizes) != "[96 96 8]" || len(res.Data) != len(inputs) || res.Usage.PromptTokens != words {
			t.Fatalf("requests of %v texts, %d vectors, usage %+v (want %d)", sizes, len(res.Data), res.Usage, words)
		}
		for i, d := range res.Data {
			want := providertest.EmbeddingVector(inputs[i], 512)
			if d.Index != int64(i) || len(d.Embedding) != 512 || float32(d.Embedding[0]) != want[0] || float32(d.Embedding[511]) != want[511] {
				t.Fatalf("item %d (index %d) is not the provider's vector of input %d", i, d.Index, i)
			}
		}
	})

	t.Run("gemini and vertex: more inputs than a Google call holds", func(t *testing.T) {
		// batchEmbedContents takes 100 inputs, predict 250, and Vertex's
		// gemini-embedding-001 one: the inputs go out in as many calls
		// and come back as one answer, in input order.
		inputs := make([]string, 260)
		for i := range inputs {
			inputs[i] = fmt.Sprintf("passage %d", i)
		}
		for _, tc := range []struct {
			model, items string
			sizes        string
			tokens       int64
		}{
			{"gemini/gemini-embedding-001", "requests", "[100 100 60]", (&providers.EmbeddingsRequest{Texts: inputs}).EstimateTokens()},
			{"vertex/text-embedding-005", "instances", "[250 10]", 520},
		} {
			before := len(fake.Requests())
			res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: tc.model, Dimensions: openai.Int(16),
				Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}})
			if err != nil {
				t.Fatal(err)
			}
			var sizes []int
			for _, r := range fake.Requests()[before:] {
				sizes = append(sizes, len(gjson.GetBytes(r.Body, tc.items).Array()))
			}
			if fmt.Sprint(sizes) != tc.sizes || len(res.Data) != len(inputs) || res.Usage.PromptTokens != tc.tokens {
				t.Fatalf("%s: calls of %v inputs, %d vectors, usage %+v", tc.model, sizes, len(res.Data), res.Usage)
			}
			for i, d := range res.Data {
				want := providertest.EmbeddingVector(inputs[i], 16)
				if d.Index != int64(i) || len(d.Embedding) != 16 || float32(d.Embedding[0]) != want[0] || float32(d.Embedding[15]) != want[15] {
					t.Fatalf("%s: item %d (index %d) is not the provider's vector of input %d", tc.model, i, d.Index, i)
				}
			}
		}
		before := len(fake.Requests())
		if res, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "vertex/gemini-embedding-001",
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs[:5]}}); err != nil || len(res.Data) != 5 || len(fake.Requests())-before != 5 {
			t.Fatalf("vertex gemini-embedding-001, one input a call: %v, %d calls", err, len(fake.Requests())-before)
		}
	})

	t.Run("batch lines", func(t *testing.T) {
		f := uploadLines(t, c, []string{
			`{"custom_id":"e1","method":"POST","url":"/v1/embeddings","body":{"model":"openai/text-embedding-3-small","input":"the red fox","encoding_format":"base64"}}`,
			`{"custom_id":"e2","method":"POST","url":"/v1/embeddings","body":{"model":"voyage/voyage-3.5","input":["a","b c"],"dimensions":4}}`,
			`{"custom_id":"e3","method":"POST","url":"/v1/embeddings","body":{"model":"gemini/gemini-embedding-001","input":["x","y z"]}}`,
		})
		b := waitBatch(t, c, newBatch(t, c, f.ID, "/v1/embeddings").ID, 20*time.Second, "completed", "failed")
		out := fileLines(t, c, b.OutputFileID)
		if b.Status != "completed" || len(out["e2"].Get("response.body.data").Array()) != 2 || len(out["e3"].Get("response.body.data").Array()) != 2 ||
			out["e1"].Get("response.body.data.0.embedding").Type != gjson.String || b.Usage.InputTokens != 3+3+2 { // Gemini's 2: estimated
			t.Errorf("batch %s, usage %+v: %v", b.Status, b.Usage, out)
		}
	})
}
