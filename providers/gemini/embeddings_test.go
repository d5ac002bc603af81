package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providertest"
)

const embeddingsDir = "../../testdata/providers/gemini/embeddings"

// embeddingsService is the service a golden case runs on, from its name's
// prefix: gemini_ (the Developer API), vertex_ (a project in us-central1)
// or express_ (Vertex AI's express mode).
func embeddingsService(t testing.TB, name string) Embeddings {
	switch {
	case strings.HasPrefix(name, "gemini_"):
		return Embeddings{}
	case strings.HasPrefix(name, "vertex_"):
		return Embeddings{Chat{Vertex: true, Project: "my-proj", Location: "us-central1"}}
	case strings.HasPrefix(name, "express_"):
		return Embeddings{Chat{Vertex: true}}
	}
	t.Fatalf("case %s names no service", name)
	return Embeddings{}
}

// TestEmbeddingsGolden runs each case through the translator both ways:
// <case>.unified.json, the client's request (its model is the provider's
// name of the model), becomes the requests of <case>.requests.json (each
// {path, body}); the provider's answers to them, <case>.answers.json,
// become the client's answer, <case>.answer.json.
func TestEmbeddingsGolden(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, embeddingsDir, ".unified.json") {
		t.Run(name, func(t *testing.T) {
			e := embeddingsService(t, name)
			req, err := providers.ValidateEmbeddings(translatortest.ReadFile(t, filepath.Join(embeddingsDir, name+".unified.json")))
			if err != nil {
				t.Fatalf("the input does not pass ValidateEmbeddings: %v", err)
			}
			reqs, err := e.EmbeddingsRequests(&req, req.Model)
			if err != nil {
				t.Fatal(err)
			}
			out := []byte{'['}
			for i, r := range reqs {
				if r.Query != "" || r.Header != nil || r.Framing != nil {
					t.Errorf("request %d: query %q, header %v, framing %v", i, r.Query, r.Header, r.Framing)
				}
				if i > 0 {
					out = append(out, ',')
				}
				out = append(out, `{"path":`...)
				out = providers.AppendString(out, r.Path)
				out = append(out, `,"body":`...)
				out = append(out, r.Body...)
				out = append(out, '}')
			}
			translatortest.CheckGolden(t, filepath.Join(embeddingsDir, name+".requests.json"), append(out, ']'))

			answers, err := filepath.Glob(filepath.Join(embeddingsDir, name+".answers.json"))
			if err != nil || len(answers) == 0 {
				return
			}
			list := gjson.ParseBytes(translatortest.ReadFile(t, answers[0])).Array()
			if len(list) != len(reqs) {
				t.Fatalf("%d answers for %d requests", len(list), len(reqs))
			}
			res := providers.EmbeddingsResult{}
			for i, a := range list {
				if err := e.EmbeddingsResponse(i, http.Header{}, []byte(a.Raw), &res); err != nil {
					t.Fatalf("answer %d: %v", i, err)
				}
			}
			answer, ok := providers.EmbeddingsAnswer(nil, &req, &res)
			if !ok {
				t.Fatalf("the answers do not fit the request: %+v", res)
			}
			translatortest.CheckGolden(t, filepath.Join(embeddingsDir, name+".answer.json"), answer)
		})
	}
}

func TestVertexEmbedMethod(t *testing.T) {
	for model, want := range map[string]string{
		"text-embedding-005":                            methodPredict,
		"text-multilingual-embedding-002":               methodPredict,
		"gemini-embedding-001":                          methodPredict,
		"publishers/google/models/gemini-embedding-001": methodPredict,
		"models/gemini-embedding-001":                   methodPredict,
		"endpoints/1234567890":                          methodPredict,
		"gemini-embedding-2-preview":                    methodEmbedContent,
		"publishers/google/models/gemini-embedding-2":   methodEmbedContent,
		"multimodalembedding@001":                       methodPredict,
		"publishers/intfloat/models/e5-large-maas":      methodEmbedContent,
	} {
		if got := vertexEmbedMethod(model); got != want {
			t.Errorf("%s: %s, want %s", model, got, want)
		}
	}
}

// TestEmbeddingsChunks: inputs are cut into as many calls as each
// service's limits need, in input order.
func TestEmbeddingsChunks(t *testing.T) {
	texts := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(i) + strings.Repeat("x", max(0, size-len(strconv.Itoa(i))))
		}
		return out
	}
	vertex := Embeddings{Chat{Vertex: true, Project: "p", Location: "europe-west4"}}
	for _, tc := range []struct {
		name  string
		e     Embeddings
		model string
		texts []string
		sizes []int // inputs per call
		items string
	}{
		{"batchEmbedContents: 100 a call", Embeddings{}, "gemini-embedding-001", texts(250, 5), []int{100, 100, 50}, "requests"},
		{"batchEmbedContents: one call", Embeddings{}, "gemini-embedding-001", texts(100, 5), []int{100}, "requests"},
		{"predict: 250 a call", vertex, "text-embedding-005", texts(600, 5), []int{250, 250, 100}, "instances"},
		{"predict: about 40 kB of text a call", vertex, "text-embedding-005", texts(5, 15_000), []int{2, 2, 1}, "instances"},
		{"predict: a long text alone", vertex, "text-embedding-005", []string{"a", strings.Repeat("y", 50_000), "b"}, []int{1, 1, 1}, "instances"},
		{"predict: gemini-embedding-001 one a call", vertex, "gemini-embedding-001", texts(3, 5), []int{1, 1, 1}, "instances"},
		{"embedContent: one a call", vertex, "gemini-embedding-2-preview", texts(3, 5), []int{1, 1, 1}, "content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := tc.e.EmbeddingsRequests(&providers.EmbeddingsRequest{Texts: tc.texts}, tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(tc.sizes) {
				t.Fatalf("%d calls, want %d", len(reqs), len(tc.sizes))
			}
			next := 0
			for i, r := range reqs {
				if !json.Valid(r.Body) {
					t.Fatalf("call %d: %s", i, r.Body)
				}
				var got []string
				if tc.items == "content" {
					got = []string{gjson.GetBytes(r.Body, "content.parts.0.text").Str}
				} else {
					for _, it := range gjson.GetBytes(r.Body, tc.items).Array() {
						if tc.items == "requests" {
							got = append(got, it.Get("content.parts.0.text").Str)
						} else {
							got = append(got, it.Get("content").Str)
						}
					}
				}
				if len(got) != tc.sizes[i] {
					t.Fatalf("call %d holds %d inputs, want %d", i, len(got), tc.sizes[i])
				}
				for _, text := range got {
					if text != tc.texts[next] {
						t.Fatalf("call %d: input %q, want %q", i, text, tc.texts[next])
					}
					next++
				}
			}
		})
	}
}

func TestEmbeddingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		e     Embeddings
		req   providers.EmbeddingsRequest
		model string
		param string
	}{
		{"token ids", Embeddings{}, providers.EmbeddingsRequest{Tokens: [][]int64{{1, 2}}}, "gemini-embedding-001", "input (token ids)"},
		{"token ids on Vertex", Embeddings{Chat{Vertex: true, Project: "p"}}, providers.EmbeddingsRequest{Tokens: [][]int64{{1}}}, "text-embedding-005", "input (token ids)"},
		{"a model leaving its resource", Embeddings{}, providers.EmbeddingsRequest{Texts: []string{"a"}}, "../files", "model"},
		{"a method in the model", Embeddings{Chat{Vertex: true}}, providers.EmbeddingsRequest{Texts: []string{"a"}}, "text-embedding-005:predict", "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.e.EmbeddingsRequests(&tc.req, tc.model)
			var e *providers.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Param != tc.param {
				t.Errorf("%v, want a 400 on %s", err, tc.param)
			}
		})
	}
}

func TestEmbeddingsResponseMalformed(t *testing.T) {
	vertex := Embeddings{Chat{Vertex: true, Project: "p"}}
	for _, tc := range []struct {
		name string
		e    Embeddings
		body string
	}{
		{"not JSON", Embeddings{}, `<html>`},
		{"an array", Embeddings{}, `[{"embeddings":[{"values":[1]}]}]`},
		{"no embeddings", Embeddings{}, `{}`},
		{"empty embeddings", Embeddings{}, `{"embeddings":[]}`},
		{"values not numbers", Embeddings{}, `{"embeddings":[{"values":["1"]}]}`},
		{"no values", Embeddings{}, `{"embeddings":[{}]}`},
		{"Vertex's answer from the Developer API", Embeddings{}, `{"predictions":[{"embeddings":{"values":[1]}}]}`},
		{"neither predictions nor embedding", vertex, `{"embeddings":[{"values":[1]}]}`},
		{"empty predictions", vertex, `{"predictions":[]}`},
		{"a prediction without values", vertex, `{"predictions":[{"embeddings":{"statistics":{"token_count":1}}}]}`},
		{"embedding not a vector", vertex, `{"embedding":{"values":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res providers.EmbeddingsResult
			if err := tc.e.EmbeddingsResponse(0, nil, []byte(tc.body), &res); err == nil {
				t.Errorf("accepted: %+v", res)
			}
		})
	}
}

// TestEmbeddingsErrors: Google's error answers map as chat's do.
func TestEmbeddingsErrors(t *testing.T) {
	e := Embeddings{Chat{Vertex: true, Project: "p"}}
	got := e.Error(429, nil, []byte(`{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}`))
	if got.Status != 429 || got.Code != "rate_limit_exceeded" || got.RetryAfter.Seconds() != 7 {
		t.Errorf("%+v", got)
	}
	got = e.Error(400, nil, []byte(`{"error":{"code":400,"message":"Unable to submit request because the input token count is 20483 but model only supports up to 20000. Reduce the input token count and try again.","status":"INVALID_ARGUMENT"}}`))
	if got.Status != 400 || got.Code != "context_length_exceeded" {
		t.Errorf("%+v", got)
	}
}

// FuzzEmbeddingsRequest checks that every request ValidateEmbeddings
// accepts translates, on every service, into valid JSON bodies holding
// every input once, or fails with a 4xx *providers.Error.
func FuzzEmbeddingsRequest(f *testing.F) {
	for _, name := range translatortest.GoldenCases(f, embeddingsDir, ".unified.json") {
		f.Add(translatortest.ReadFile(f, filepath.Join(embeddingsDir, name+".unified.json")), "gemini-embedding-001")
	}
	f.Add([]byte(`{"model":"m","input":[[1,2],[3]]}`), "text-embedding-005")
	f.Add([]byte(`{"model":"m","input":["a\u0000\"","\ud800"],"dimensions":3,"input_type":"\"x"}`), "publishers/google/models/gemini-embedding-2")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		req, err := providers.ValidateEmbeddings(body)
		if err != nil {
			return
		}
		for _, e := range []Embeddings{{}, {Chat{Vertex: true, Project: "p", Location: "us"}}, {Chat{Vertex: true}}} {
			reqs, err := e.EmbeddingsRequests(&req, model)
			if err != nil {
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Status < 400 || pe.Status >= 500 {
					t.Fatalf("error %v is not a 4xx *providers.Error", err)
				}
				continue
			}
			n := 0
			for _, r := range reqs {
				if !json.Valid(r.Body) {
					t.Fatalf("invalid JSON: %s", r.Body)
				}
				root := gjson.ParseBytes(r.Body)
				n += len(root.Get("requests").Array()) + len(root.Get("instances").Array())
				if root.Get("content").Exists() {
					n++
				}
			}
			if n != req.Inputs() {
				t.Fatalf("%d inputs sent for %d", n, req.Inputs())
			}
		}
	})
}

// FuzzEmbeddingsResponse checks that any answer is read or refused, and
// that what is read makes a valid unified answer.
func FuzzEmbeddingsResponse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(embeddingsDir, "*.answers.json"))
	for _, file := range files {
		for _, a := range gjson.ParseBytes(translatortest.ReadFile(f, file)).Array() {
			f.Add([]byte(a.Raw))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, e := range []Embeddings{{}, {Chat{Vertex: true, Project: "p"}}} {
			var res providers.EmbeddingsResult
			if err := e.EmbeddingsResponse(0, nil, body, &res); err != nil {
				continue
			}
			if len(res.Vectors) == 0 || res.PromptTokens != 0 && !res.Counted {
				t.Fatalf("read %+v", res)
			}
			req := providers.EmbeddingsRequest{Model: "m", Texts: make([]string, len(res.Vectors)), Base64: len(body)%2 == 0}
			if out, ok := providers.EmbeddingsAnswer(nil, &req, &res); !ok || !json.Valid(out) {
				t.Fatalf("%s", out)
			}
		}
	})
}

// TestEmbeddingsAgainstFake sends the translated requests to the fake
// provider, which checks them as Google does (limits included), and reads
// its answers back: every value of every vector is the fake's, in input
// order, with the usage each service reports.
func TestEmbeddingsAgainstFake(t *testing.T) {
	fake := providertest.Start(t, providertest.Options{Keys: map[string]string{"gemini": "gk", "vertex": "vk"}})
	key := func(h, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(h, v) } }
	texts := make([]string, 130)
	for i := range texts {
		texts[i] = "text number " + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		name, base, model string
		e                 Embeddings
		auth              func(*http.Request)
		calls             int // for the 130 texts
	}{
		{"gemini", fake.URL + "/v1beta", "gemini-embedding-001", Embeddings{}, key("X-Goog-Api-Key", "gk"), 2},
		{"vertex predict", fake.URL + "/v1", "text-embedding-005", Embeddings{Chat{Vertex: true, Project: "p1", Location: "us-central1"}}, key("Authorization", "Bearer vk"), 1},
		{"vertex gemini-embedding-001", fake.URL + "/v1", "gemini-embedding-001", Embeddings{Chat{Vertex: true, Project: "p1"}}, key("Authorization", "Bearer vk"), 130},
		{"vertex embedContent", fake.URL + "/v1", "publishers/google/models/gemini-embedding-2-preview", Embeddings{Chat{Vertex: true, Project: "p1"}}, key("Authorization", "Bearer vk"), 130},
		{"express", fake.URL + "/v1", "text-multilingual-embedding-002", Embeddings{Chat{Vertex: true}}, key("X-Goog-Api-Key", "vk"), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, dims := range []int{0, 8} {
				req := &providers.EmbeddingsRequest{Model: "alias", Texts: texts, Dimensions: dims, InputType: "query"}
				reqs, err := tc.e.EmbeddingsRequests(req, tc.model)
				if err != nil || len(reqs) != tc.calls {
					t.Fatalf("%d calls (%v), want %d", len(reqs), err, tc.calls)
				}
				var res providers.EmbeddingsResult
				for i, r := range reqs {
					hr, _ := http.NewRequest(http.MethodPost, tc.base+r.Path, bytes.NewReader(r.Body))
					hr.Header.Set("Content-Type", "application/json")
					tc.auth(hr)
					resp, err := http.DefaultClient.Do(hr)
					if err != nil {
						t.Fatal(err)
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
					}
					if err := tc.e.EmbeddingsResponse(i, resp.Header, body, &res); err != nil {
						t.Fatal(err)
					}
				}
				if _, ok := providers.EmbeddingsAnswer(nil, req, &res); !ok {
					t.Fatalf("the answers do not fit: %d vectors", len(res.Vectors))
				}
				want := dims
				if want == 0 {
					want = providertest.EmbeddingDims
				}
				for i, v := range res.Vectors {
					w := providertest.EmbeddingVector(texts[i], want)
					if len(v) != len(w) {
						t.Fatalf("vector %d: %d values", i, len(v))
					}
					for j := range v {
						if math.Float32bits(v[j]) != math.Float32bits(w[j]) {
							t.Fatalf("vector %d value %d: %v, want %v", i, j, v[j], w[j])
						}
					}
				}
				if tc.name == "gemini" {
					if res.Counted || res.PromptTokens != 0 {
						t.Errorf("the Developer API reports no usage: %+v", res.PromptTokens)
					}
				} else if !res.Counted || res.PromptTokens != 3*130 {
					t.Errorf("usage %d (counted %v), want %d", res.PromptTokens, res.Counted, 3*130)
				}
			}
		})
	}
	// The task type went as Gemini names it.
	for _, r := range fake.Requests() {
		task := gjson.GetBytes(r.Body, "requests.0.taskType").Str + gjson.GetBytes(r.Body, "instances.0.task_type").Str +
			gjson.GetBytes(r.Body, "embedContentConfig.taskType").Str
		if task != "RETRIEVAL_QUERY" {
			t.Fatalf("%s: task type %q", r.Path, task)
		}
	}
}
