package providertest

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const (
	geEmbedPath = "/v1beta/models/gemini-embedding-001:batchEmbedContents"
	vxProject   = "/v1/projects/p1/locations/us-central1/publishers/google/models/"
)

// sameVector reports whether values (JSON numbers) are EmbeddingVector's
// of text, value for value as float32.
func sameVector(values gjson.Result, text string, dims int) bool {
	want := EmbeddingVector(text, dims)
	got := values.Array()
	if len(got) != dims {
		return false
	}
	for i, v := range got {
		f, err := strconv.ParseFloat(v.Raw, 32)
		if err != nil || math.Float32bits(float32(f)) != math.Float32bits(want[i]) {
			return false
		}
	}
	return true
}

// embedRequest is a batchEmbedContents request of one text.
func embedRequest(model, text, more string) string {
	r := `{"model":"` + model + `","content":{"parts":[{"text":` + strconv.Quote(text) + `}]}`
	if more != "" {
		r += "," + more
	}
	return r + "}"
}

// TestGoogleEmbeddings: the Developer API's batchEmbedContents and
// embedContent, Vertex AI's predict and embedContent, each answering
// EmbeddingVector's vectors in the service's shape, with the usage each
// reports (none on the Developer API).
func TestGoogleEmbeddings(t *testing.T) {
	s := Start(t, Options{Keys: map[string]string{"gemini": "gk"}})
	vxAuth := []string{"Authorization", "Bearer vk"}

	t.Run("batchEmbedContents", func(t *testing.T) {
		body := `{"requests":[` + embedRequest("models/gemini-embedding-001", "red fox", `"taskType":"RETRIEVAL_QUERY","outputDimensionality":8`) + "," +
			embedRequest("models/gemini-embedding-001", "a blue whale", `"taskType":"RETRIEVAL_DOCUMENT","title":"Whales","outputDimensionality":8`) + `]}`
		res, out := post(t, s, geEmbedPath, body, geAuth...)
		e := gjson.Get(out, "embeddings")
		if res.StatusCode != 200 || len(e.Array()) != 2 || !sameVector(e.Get("0.values"), "red fox", 8) || !sameVector(e.Get("1.values"), "a blue whale", 8) ||
			strings.Contains(out, "usage") || strings.Contains(out, "token") {
			t.Errorf("%d %s", res.StatusCode, out)
		}
	})
	t.Run("Developer API embedContent", func(t *testing.T) {
		res, out := post(t, s, "/v1beta/models/gemini-embedding-001:embedContent", `{"content":{"parts":[{"text":"red"},{"text":"fox"}]}}`, geAuth...)
		if res.StatusCode != 200 || !sameVector(gjson.Get(out, "embedding.values"), "red fox", EmbeddingDims) {
			t.Errorf("%d %s", res.StatusCode, out)
		}
	})
	t.Run("predict", func(t *testing.T) {
		res, out := post(t, s, vxProject+"text-embedding-005:predict",
			`{"instances":[{"content":"red fox","task_type":"RETRIEVAL_QUERY"},{"content":"a blue whale swims"}],"parameters":{"outputDimensionality":16,"autoTruncate":true}}`, vxAuth...)
		p := gjson.Get(out, "predictions")
		if res.StatusCode != 200 || len(p.Array()) != 2 || !sameVector(p.Get("0.embeddings.values"), "red fox", 16) ||
			!sameVector(p.Get("1.embeddings.values"), "a blue whale swims", 16) || p.Get("0.embeddings.statistics.token_count").Int() != 2 ||
			p.Get("1.embeddings.statistics.token_count").Int() != 4 || gjson.Get(out, "metadata.billableCharacterCount").Int() != 25 {
			t.Errorf("%d %s", res.StatusCode, out)
		}
	})
	t.Run("Vertex embedContent", func(t *testing.T) {
		res, out := post(t, s, "/v1/publishers/google/models/gemini-embedding-2-preview:embedContent",
			`{"content":{"role":"user","parts":[{"text":"red fox"}]},"embedContentConfig":{"taskType":"SEMANTIC_SIMILARITY","outputDimensionality":4}}`, geAuth...)
		if res.StatusCode != 200 || !sameVector(gjson.Get(out, "embedding.values"), "red fox", 4) || gjson.Get(out, "usageMetadata.promptTokenCount").Int() != 2 {
			t.Errorf("express: %d %s", res.StatusCode, out)
		}
	})
	t.Run("scripted failures in Google's shape", func(t *testing.T) {
		res, out := post(t, s, "/v1beta/models/fail-429:batchEmbedContents", `{"requests":[`+embedRequest("models/fail-429", "x", "")+`]}`, geAuth...)
		if res.StatusCode != 429 || gjson.Get(out, "error.status").Str != "RESOURCE_EXHAUSTED" {
			t.Errorf("%d %s", res.StatusCode, out)
		}
	})

	many := func(n int, item string) string {
		items := make([]string, n)
		for i := range items {
			items[i] = item
		}
		return strings.Join(items, ",")
	}
	long := strings.Repeat("word ", 10001)
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"OpenAI's body", geEmbedPath, `{"model":"gemini-embedding-001","input":["x"]}`, `Unknown name "model"`},
		{"no requests", geEmbedPath, `{"requests":[]}`, "must not be empty"},
		{"101 requests", geEmbedPath, `{"requests":[` + many(101, embedRequest("models/gemini-embedding-001", "x", "")) + `]}`, "at most 100 requests"},
		{"no model", geEmbedPath, `{"requests":[{"content":{"parts":[{"text":"x"}]}}]}`, "model of every request"},
		{"another model", geEmbedPath, `{"requests":[` + embedRequest("models/text-embedding-004", "x", "") + `]}`, "model of every request"},
		{"empty text", geEmbedPath, `{"requests":[` + embedRequest("models/gemini-embedding-001", "", "") + `]}`, "empty text"},
		{"unknown task", geEmbedPath, `{"requests":[` + embedRequest("models/gemini-embedding-001", "x", `"taskType":"query"`) + `]}`, "task_type"},
		{"title of a query", geEmbedPath, `{"requests":[` + embedRequest("models/gemini-embedding-001", "x", `"taskType":"RETRIEVAL_QUERY","title":"t"`) + `]}`, "RETRIEVAL_DOCUMENT"},
		{"dimensions", geEmbedPath, `{"requests":[` + embedRequest("models/gemini-embedding-001", "x", `"outputDimensionality":0`) + `]}`, "output_dimensionality"},
		{"Vertex's field", geEmbedPath, `{"requests":[` + embedRequest("models/gemini-embedding-001", "x", `"autoTruncate":true`) + `]}`, `Unknown name "autoTruncate"`},
		{"an image part", geEmbedPath, `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}]}`, "only text parts"},
		{"predict content not a string", vxProject + "text-embedding-005:predict", `{"instances":[{"content":{"parts":[{"text":"x"}]}}]}`, "non-empty string"},
		{"predict taskType in camelCase", vxProject + "text-embedding-005:predict", `{"instances":[{"content":"x","taskType":"RETRIEVAL_QUERY"}]}`, `Unknown name "taskType"`},
		{"predict 251 instances", vxProject + "text-embedding-005:predict", `{"instances":[` + many(251, `{"content":"x"}`) + `]}`, "exceeds the maximum of 250"},
		{"predict over 20,000 tokens", vxProject + "text-embedding-005:predict", `{"instances":[{"content":"` + long + `"},{"content":"` + long + `"}]}`, "input token count is 20002"},
		{"gemini-embedding-001 takes one instance", vxProject + "gemini-embedding-001:predict", `{"instances":[{"content":"a"},{"content":"b"}]}`, "only one instance"},
		{"predict for a newer Gemini model", vxProject + "gemini-embedding-2-preview:predict", `{"instances":[{"content":"a"}]}`, "use embedContent"},
		{"embedContent for text-embedding-005", vxProject + "text-embedding-005:embedContent", `{"content":{"parts":[{"text":"a"}]}}`, "use predict"},
		{"embedContent with the Developer API's fields", vxProject + "gemini-embedding-2-preview:embedContent", `{"content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_QUERY"}`, `Unknown name "taskType"`},
		{"embedContent with a model role", vxProject + "gemini-embedding-2-preview:embedContent", `{"content":{"role":"model","parts":[{"text":"a"}]}}`, "valid role"},
		{"batchEmbedContents on Vertex", vxProject + "gemini-embedding-001:batchEmbedContents", `{"requests":[]}`, ""},
		{"predict on the Developer API", "/v1beta/models/text-embedding-004:predict", `{"instances":[]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			auth := geAuth
			if strings.HasPrefix(tc.path, "/v1/") {
				auth = vxAuth
			}
			res, out := post(t, s, tc.path, tc.body, auth...)
			if tc.want == "" { // not a method of that service
				if res.StatusCode != 404 || gjson.Get(out, "error.status").Str != "NOT_FOUND" {
					t.Errorf("%d %s, want 404 NOT_FOUND", res.StatusCode, out)
				}
				return
			}
			if res.StatusCode != 400 || gjson.Get(out, "error.status").Str != "INVALID_ARGUMENT" || !strings.Contains(gjson.Get(out, "error.message").Str, tc.want) {
				t.Errorf("%d %s, want 400 INVALID_ARGUMENT saying %q", res.StatusCode, out, tc.want)
			}
		})
	}
}
