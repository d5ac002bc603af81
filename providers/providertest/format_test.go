package providertest

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// example is, for one wire format, a request it answers: the tests every
// format must pass (TestEveryFormat) run it.
type example struct {
	// request is a POST naming model, with the keys of newFake: its path,
	// body and header (name, value pairs).
	request func(model string) (path, body string, header []string)
	// noModel says the format cannot name a model, so no scripted
	// behaviour applies to it.
	noModel bool
	// overloaded is the status of fail-529.
	overloaded int
	// unauthorized is the status of a request without credentials;
	// 0 means 401.
	unauthorized int
	// isError reports whether a body is an error in the format's shape.
	isError func(body string) bool
	// listed says a GET of the path is served too (it lists).
	listed bool
}

// batchUpload is a multipart upload of a batch input file.
const (
	batchUploadType = "multipart/form-data; boundary=b0"
	batchUpload     = "--b0\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
		"--b0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n{}\n\r\n--b0--\r\n"
)

// formatExamples has an example for every row of formats, by name.
var formatExamples = map[string]example{
	"openai_batch": {
		request: func(string) (string, string, []string) {
			return "/v1/files", batchUpload, append([]string{"Content-Type", batchUploadType}, oaAuth...)
		},
		noModel: true,
		isError: isOpenAIError,
	},
	"anthropic_batch": {
		request: func(string) (string, string, []string) {
			return "/v1/messages/batches", `{"requests":[{"custom_id":"r1","params":{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}}]}`,
				[]string{"x-api-key", "k", "anthropic-version", "2023-06-01"}
		},
		noModel: true,
		listed:  true,
		isError: func(body string) bool {
			return gjson.Get(body, "type").Str == "error" && gjson.Get(body, "error.message").Str != ""
		},
	},
	"gemini_batch": {
		request: func(model string) (string, string, []string) {
			return "/v1beta/models/" + model + ":batchGenerateContent",
				`{"batch":{"displayName":"d","inputConfig":{"requests":{"requests":[{"request":{"contents":[{"role":"user","parts":[{"text":"hi"}]}]},"metadata":{"key":"0"}}]}}}}`,
				[]string{"x-goog-api-key", "k"}
		},
		noModel:      true,
		unauthorized: 403,
		isError: func(body string) bool {
			return gjson.Get(body, "error.message").Str != "" && gjson.Get(body, "error.status").Str != ""
		},
	},
	"bedrock_batch": {
		request: func(string) (string, string, []string) {
			return "/model-invocation-job", `{"jobName":"j1","roleArn":"arn:aws:iam::123456789012:role/r","modelId":"anthropic.claude-haiku-4-5-20251001-v1:0",` +
					`"inputDataConfig":{"s3InputDataConfig":{"s3Uri":"s3://b/in.jsonl"}},"outputDataConfig":{"s3OutputDataConfig":{"s3Uri":"s3://b/out/"}}}`,
				append([]string{"Content-Type", "application/json"}, bedrockAnyKey...)
		},
		noModel:      true,
		unauthorized: 403,
		isError: func(body string) bool {
			return gjson.Get(body, "message").Str != "" && len(gjson.Parse(body).Map()) == 1
		},
	},
	"vertex_batch": {
		request: func(string) (string, string, []string) {
			return "/v1/projects/p/locations/us-central1/batchPredictionJobs", `{"displayName":"d","model":"publishers/google/models/gemini-2.5-flash",` +
					`"inputConfig":{"instancesFormat":"jsonl","gcsSource":{"uris":["gs://b/in.jsonl"]}},"outputConfig":{"predictionsFormat":"jsonl","gcsDestination":{"outputUriPrefix":"gs://b/out"}}}`,
				[]string{"Authorization", "Bearer k"}
		},
		noModel: true,
		listed:  true,
		isError: isGoogleError,
	},
	"azure_openai_batch": {
		request: func(string) (string, string, []string) {
			return "/openai/files?api-version=2024-10-21", batchUpload, []string{"Content-Type", batchUploadType, "api-key", "k"}
		},
		noModel: true,
		isError: isOpenAIError,
	},
	"openai": {
		request: func(model string) (string, string, []string) {
			return oaPath, `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`, oaAuth
		},
		overloaded: 503,
		isError:    isOpenAIError,
	},
	"openai_moderations": {
		request: func(model string) (string, string, []string) {
			return "/v1/moderations", `{"model":"` + model + `","input":["hi"]}`, oaAuth
		},
		overloaded: 503,
		isError:    isOpenAIError,
	},
	"openai_responses": {
		request: func(model string) (string, string, []string) {
			return "/v1/responses", `{"model":"` + model + `","input":"hi"}`, oaAuth
		},
		overloaded: 503,
		isError:    isOpenAIError,
	},
	"azure_openai": {
		request: func(model string) (string, string, []string) {
			return "/openai/v1/chat/completions", `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`, []string{"api-key", "k"}
		},
		overloaded: 503,
		isError: func(body string) bool {
			return gjson.Get(body, "error.message").Str != "" && gjson.Get(body, "error.code").Exists()
		},
	},
	"bedrock": {
		request: func(model string) (string, string, []string) {
			return "/model/" + url.PathEscape(model) + "/converse", `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`, bedrockAnyKey
		},
		overloaded:   503,
		unauthorized: 403,
		isError: func(body string) bool {
			return gjson.Get(body, "message").Str != "" && len(gjson.Parse(body).Map()) == 1
		},
	},
	"cohere_chat": {
		request: func(model string) (string, string, []string) {
			return cohereChatPath, `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"stream":false}`, oaAuth
		},
		overloaded: 503,
		isError:    isCohereError,
	},
	"cohere_embed": {
		request: func(model string) (string, string, []string) {
			return cohereEmbedPath, `{"model":"` + model + `","input_type":"search_document","texts":["a red fox"]}`, oaAuth
		},
		overloaded: 503,
		isError:    isCohereError,
	},
	"gemini": {
		request: func(model string) (string, string, []string) {
			// A model name is one path segment ("x/fail-500" cannot be one).
			return "/v1beta/models/" + strings.ReplaceAll(model, "/", "-") + ":generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, []string{"X-Goog-Api-Key", "gk"}
		},
		overloaded:   503,
		unauthorized: 403, // PERMISSION_DENIED: "Method doesn't allow unregistered callers"
		isError:      isGoogleError,
	},
	"vertex": {
		request: func(model string) (string, string, []string) {
			return "/v1/projects/p1/locations/us-central1/publishers/google/models/" + strings.ReplaceAll(model, "/", "-") + ":generateContent",
				`{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`, []string{"Authorization", "Bearer vk"}
		},
		overloaded: 503,
		isError:    isGoogleError,
	},
	"anthropic": {
		request: func(model string) (string, string, []string) {
			return anPath, `{"model":"` + model + `","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`, anAuth
		},
		overloaded: 529,
		isError: func(body string) bool {
			return gjson.Get(body, "type").Str == "error" && gjson.Get(body, "error.type").Str != "" && gjson.Get(body, "error.message").Str != ""
		},
	},
}

// The rerank and embeddings rows' examples follow from their rows.
func init() {
	for _, f := range formats {
		if ef, ok := f.(*embeddingsFormat); ok {
			formatExamples[ef.id] = example{overloaded: 503, isError: isOpenAIError,
				request: func(model string) (string, string, []string) {
					return ef.path, `{"model":"` + model + `","input":["a red fox"]}`, oaAuth
				}}
			continue
		}
		rf, ok := f.(*rerankFormat)
		if !ok {
			continue
		}
		ex := example{noModel: !rf.named, overloaded: 503, isError: isOpenAIError}
		switch rf.id {
		case "cohere":
			ex.isError = isCohereError
		case "tei":
			ex.isError = func(body string) bool {
				return gjson.Get(body, "error").Str != "" && gjson.Get(body, "error_type").Str != ""
			}
		}
		ex.request = func(model string) (string, string, []string) {
			body := `{"query":"red fox","` + rf.docs + `":["a red fox","a blue whale"]`
			if rf.named {
				body += `,"model":"` + model + `"`
			}
			return rf.path, body + "}", oaAuth
		}
		formatExamples[rf.id] = ex
	}
}

// isCohereError reports whether body is Cohere's error shape, {"message"}
// (with an id where the chat route writes it).
func isCohereError(body string) bool { return gjson.Get(body, "message").Str != "" }

// isGoogleError reports whether body is Google's error envelope.
func isGoogleError(body string) bool {
	e := gjson.Get(body, "error")
	return e.Get("code").Type == gjson.Number && e.Get("message").Str != "" && e.Get("status").Str != ""
}

func isOpenAIError(body string) bool {
	e := gjson.Get(body, "error")
	return e.Get("message").Str != "" && e.Get("type").Str != "" && e.Get("param").Exists() && e.Get("code").Exists()
}

// TestEveryFormat runs every format's example, the registered ones' too,
// through what ServeHTTP and call do for all formats alike: the answer, the 401 without credentials,
// the 404 for another method, and every scripted failure, each in the
// format's own shape.
func TestEveryFormat(t *testing.T) {
	s := newFake(t)
	for _, f := range append(formats[:len(formats):len(formats)], registeredFormats()...) {
		ex, ok := formatExamples[f.name()]
		if !ok {
			t.Errorf("format %q has no example in formatExamples", f.name())
			continue
		}
		t.Run(f.name(), func(t *testing.T) {
			// send sends the example naming model.
			send := func(t *testing.T, method, model string) (*http.Response, string) {
				t.Helper()
				path, body, header := ex.request(model)
				return Send(t, method, s.URL+path, body, header...)
			}
			model := "m-" + f.name()
			res, body := send(t, http.MethodPost, model)
			if res.StatusCode != 200 || !gjson.Valid(body) {
				t.Fatalf("the example: %d %s", res.StatusCode, body)
			}
			last := s.Requests()[len(s.Requests())-1]
			if last.Format != f.name() || (!ex.noModel && last.Model != model) {
				t.Errorf("recorded format %q model %q", last.Format, last.Model)
			}

			wantError := func(t *testing.T, res *http.Response, body string, status int) {
				t.Helper()
				if res.StatusCode != status || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !ex.isError(body) {
					t.Errorf("%d %s %s, want a %d error in the format's shape", res.StatusCode, res.Header.Get("Content-Type"), body, status)
				}
			}
			t.Run("no credentials", func(t *testing.T) {
				path, body, _ := ex.request(model)
				res, body := post(t, s, path, body)
				status := ex.unauthorized
				if status == 0 {
					status = 401
				}
				wantError(t, res, body, status)
			})
			t.Run("another method", func(t *testing.T) {
				if ex.listed {
					t.Skip("a GET of the path lists")
				}
				res, body := send(t, http.MethodGet, model)
				wantError(t, res, body, 404)
			})
			if ex.noModel {
				return
			}
			for _, tc := range []struct {
				model  string
				status int
			}{{"fail-429", 429}, {"x/fail-500", 500}, {"fail-529", ex.overloaded}} {
				t.Run(tc.model, func(t *testing.T) {
					res, body := send(t, http.MethodPost, tc.model)
					wantError(t, res, body, tc.status)
					if ra := res.Header.Get("Retry-After"); (tc.status == 429) != (ra == "1") {
						t.Errorf("retry-after %q", ra)
					}
				})
			}
			t.Run("fail-html", func(t *testing.T) {
				res, body := send(t, http.MethodPost, "fail-html")
				if res.StatusCode != 502 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "<html>") {
					t.Errorf("%d %s %s", res.StatusCode, res.Header.Get("Content-Type"), body)
				}
			})
			t.Run("flaky", func(t *testing.T) {
				res, body := send(t, http.MethodPost, "flaky-"+f.name())
				wantError(t, res, body, 429)
				if res.Header.Get("Retry-After-Ms") != "50" || res.Header.Get("Retry-After") != "1" {
					t.Errorf("retry headers %v", res.Header)
				}
				if res, body := send(t, http.MethodPost, "flaky-"+f.name()); res.StatusCode != 200 {
					t.Errorf("the repeat: %d %s", res.StatusCode, body)
				}
			})
			t.Run("slow", func(t *testing.T) {
				start := time.Now()
				res, body := send(t, http.MethodPost, "slow-30ms")
				if d := time.Since(start); d < 25*time.Millisecond || res.StatusCode != 200 {
					t.Errorf("%d in %v: %s", res.StatusCode, d, body)
				}
			})
		})
	}
}

// TestAzure: the classic deployment URL names the model and needs
// api-version; streams open with Azure's prompt filter chunk.
func TestAzure(t *testing.T) {
	s := Start(t, Options{Keys: map[string]string{"azure_openai": "az-key"}})
	body := `{"model":"ignored","messages":[{"role":"user","content":"hi there"}]}`
	res, got := Send(t, http.MethodPost, s.URL+"/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21", body, "api-key", "az-key")
	if res.StatusCode != 200 || gjson.Get(got, "choices.0.message.content").Str != "echo: hi there" {
		t.Fatalf("classic: %d %s", res.StatusCode, got)
	}
	if r := s.Requests(); r[len(r)-1].Model != "prod-4o" || r[len(r)-1].Format != "azure_openai" {
		t.Errorf("recorded %+v", r[len(r)-1])
	}
	res, got = Send(t, http.MethodPost, s.URL+"/openai/deployments/prod-4o/chat/completions", body, "api-key", "az-key")
	if res.StatusCode != 400 || gjson.Get(got, "error.code").Str != "MissingApiVersionParameter" {
		t.Errorf("no api-version: %d %s", res.StatusCode, got)
	}
	res, got = Send(t, http.MethodPost, s.URL+"/openai/v1/chat/completions", `{"model":"prod-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer az-key")
	if res.StatusCode != 200 || !strings.HasPrefix(got, `data: {"choices":[],`) || !strings.Contains(got, "prompt_filter_results") || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Errorf("v1 stream: %d %s", res.StatusCode, got)
	}
	if res, _ = Send(t, http.MethodPost, s.URL+"/openai/v1/chat/completions", body, "api-key", "wrong"); res.StatusCode != 401 {
		t.Errorf("wrong key: %d", res.StatusCode)
	}
}

// TestEmbeddings: vectors are EmbeddingVector's, exact in decimal and in
// base64, in input order, with the dimensions asked for under the format's
// own field name; fields of another format are refused.
func TestEmbeddings(t *testing.T) {
	s := Start(t, Options{})
	for _, tc := range []struct {
		name, path, body string
		status           int
		dims             int
		tokens           int64
	}{
		{"openai floats", "/v1/embeddings", `{"model":"m","input":["red fox","blue whale swims"],"dimensions":8}`, 200, 8, 5},
		{"openai base64", "/v1/embeddings", `{"model":"m","input":"red fox","encoding_format":"base64"}`, 200, EmbeddingDims, 2},
		{"openai token ids", "/v1/embeddings", `{"model":"m","input":[[1,2],[3]]}`, 200, EmbeddingDims, 3},
		{"voyage", "/voyage/v1/embeddings", `{"model":"m","input":["red fox"],"output_dimension":16,"input_type":"query"}`, 200, 16, 2},
		{"voyage refuses dimensions", "/voyage/v1/embeddings", `{"model":"m","input":["red fox"],"dimensions":16}`, 400, 0, 0},
		{"tei refuses dimensions", "/tei/v1/embeddings", `{"input":["red fox"],"dimensions":16}`, 400, 0, 0},
		{"together refuses token ids", "/together/v1/embeddings", `{"model":"m","input":[1,2]}`, 400, 0, 0},
		{"unknown field", "/v1/embeddings", `{"model":"m","input":"x","task":"q"}`, 400, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, got := Send(t, http.MethodPost, s.URL+tc.path, tc.body, "Authorization", "Bearer k")
			if res.StatusCode != tc.status {
				t.Fatalf("%d %s", res.StatusCode, got)
			}
			if tc.status != 200 {
				return
			}
			inputs := gjson.Get(tc.body, "input")
			var texts []string
			switch {
			case inputs.Type == gjson.String:
				texts = []string{inputs.Str}
			case inputs.Array()[0].IsArray():
				texts = []string{"tok1 tok2", "tok3"}
			default:
				for _, in := range inputs.Array() {
					texts = append(texts, in.Str)
				}
			}
			data := gjson.Get(got, "data").Array()
			if len(data) != len(texts) {
				t.Fatalf("%d vectors for %d inputs", len(data), len(texts))
			}
			for i, d := range data {
				want := EmbeddingVector(texts[i], tc.dims)
				var vec []float32
				if e := d.Get("embedding"); e.Type == gjson.String {
					raw, _ := base64.StdEncoding.DecodeString(e.Str)
					for j := 0; j+4 <= len(raw); j += 4 {
						vec = append(vec, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
					}
				} else {
					for _, x := range e.Array() {
						f, _ := strconv.ParseFloat(x.Raw, 32)
						vec = append(vec, float32(f))
					}
				}
				if len(vec) != len(want) {
					t.Fatalf("vector %d has %d values, want %d", i, len(vec), len(want))
				}
				for j := range vec {
					if math.Float32bits(vec[j]) != math.Float32bits(want[j]) {
						t.Fatalf("vector %d value %d: %v, want %v", i, j, vec[j], want[j])
					}
				}
			}
			if n := gjson.Get(got, "usage.total_tokens").Int(); n != tc.tokens {
				t.Errorf("usage %d, want %d", n, tc.tokens)
			}
		})
	}
}
