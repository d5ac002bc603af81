package cohere

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	cohere "github.com/cohere-ai/cohere-go/v2"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providertest"
)

const (
	embedDir         = "../../testdata/providers/cohere/embed"
	embedResponseDir = "../../testdata/providers/cohere/embed/response"

	// embedModel is the provider's model name the tests translate for.
	embedModel = "embed-v4.0"
)

// translateEmbed validates a unified embeddings body and translates it.
func translateEmbed(t testing.TB, body string) (providers.EmbeddingsRequest, []providers.Request, error) {
	t.Helper()
	req, err := providers.ValidateEmbeddings([]byte(body))
	if err != nil {
		t.Fatalf("the input does not pass ValidateEmbeddings: %v", err)
	}
	reqs, err := Embeddings{}.EmbeddingsRequests(&req, embedModel)
	return req, reqs, err
}

// TestEmbedRequestGolden translates every unified embeddings request under
// testdata/providers/cohere/embed and compares the requests, as a JSON
// array of {path, body}, with the golden file.
func TestEmbedRequestGolden(t *testing.T) {
	translatortest.Golden(t, embedDir, ".unified.json", ".cohere.json", func(t *testing.T, _ string, in []byte) []byte {
		_, reqs, err := translateEmbed(t, string(in))
		if err != nil {
			t.Fatalf("EmbeddingsRequests: %v", err)
		}
		return requestsJSON(t, reqs)
	})
}

// requestsJSON writes requests as a JSON array of {path, body}; anything
// else set on a request fails t.
func requestsJSON(t testing.TB, reqs []providers.Request) []byte {
	t.Helper()
	for i, r := range reqs {
		if r.Query != "" || r.Framing != nil || len(r.Header) != 0 {
			t.Errorf("request %d sets more than a path and a body: %+v", i, r)
		}
	}
	return translatortest.RequestsJSON(t, reqs)
}

// TestEmbedRequestMapping states the points of the mapping one by one.
func TestEmbedRequestMapping(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       map[string]string // gjson path in the first request → raw JSON; "" means absent
	}{
		{"input_type query", `{"model":"m","input":"q","input_type":"query"}`, map[string]string{"input_type": `"search_query"`}},
		{"input_type document", `{"model":"m","input":"q","input_type":"document"}`, map[string]string{"input_type": `"search_document"`}},
		{"input_type defaults to search_document", `{"model":"m","input":"q"}`, map[string]string{"input_type": `"search_document"`}},
		{"input_type null is the default", `{"model":"m","input":"q","input_type":null}`, map[string]string{"input_type": `"search_document"`}},
		{"Cohere's own input_type passes", `{"model":"m","input":"q","input_type":"search_query"}`, map[string]string{"input_type": `"search_query"`}},
		{"another input_type as given", `{"model":"m","input":"q","input_type":"clustering"}`, map[string]string{"input_type": `"clustering"`}},
		{"a string input is one text", `{"model":"m","input":"a \"b\""}`, map[string]string{"texts": `["a \"b\""]`}},
		{"floats asked for, whatever the client's encoding", `{"model":"m","input":"q","encoding_format":"base64"}`,
			map[string]string{"embedding_types": `["float"]`, "encoding_format": ""}},
		{"dimensions", `{"model":"m","input":"q","dimensions":1024}`, map[string]string{"output_dimension": "1024", "dimensions": ""}},
		{"no dimensions", `{"model":"m","input":"q"}`, map[string]string{"output_dimension": ""}},
		{"user dropped", `{"model":"m","input":"q","user":"u-1"}`, map[string]string{"user": ""}},
		{"the provider's model", `{"model":"alias","input":"q"}`, map[string]string{"model": `"` + embedModel + `"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, reqs, err := translateEmbed(t, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != 1 || reqs[0].Path != "/v2/embed" {
				t.Fatalf("requests %+v", reqs)
			}
			for path, want := range tc.want {
				if got := gjson.GetBytes(reqs[0].Body, path).Raw; got != want {
					t.Errorf("%s = %s, want %s in %s", path, got, want, reqs[0].Body)
				}
			}
		})
	}
}

// TestEmbedRequestRefused: what Cohere cannot do is a 400 naming the
// parameter, before anything is sent.
func TestEmbedRequestRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, param string }{
		{"token ids", `{"model":"m","input":[1,2,3]}`, "input (token ids)"},
		{"arrays of token ids", `{"model":"m","input":[[1],[2]]}`, "input (token ids)"},
		{"dimensions Cohere does not offer", `{"model":"m","input":"q","dimensions":768}`, "dimensions"},
		{"dimensions too small", `{"model":"m","input":"q","dimensions":1}`, "dimensions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, reqs, err := translateEmbed(t, tc.body)
			var e *providers.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code != "unsupported_parameter" || e.Param != tc.param || reqs != nil {
				t.Fatalf("got %v (%+v), %d requests; want a 400 unsupported_parameter for %s", err, e, len(reqs), tc.param)
			}
			if !strings.Contains(e.Message, "cohere") {
				t.Errorf("message %q does not name the provider type", e.Message)
			}
		})
	}
	for _, d := range OutputDimensions {
		if _, _, err := translateEmbed(t, `{"model":"m","input":"q","dimensions":`+strconv.Itoa(d)+`}`); err != nil {
			t.Errorf("dimensions %d: %v", d, err)
		}
	}
}

// TestEmbedRequestSplits: more than MaxEmbedTexts inputs go out as
// several requests of at most MaxEmbedTexts texts, in input order, each
// with the same options.
func TestEmbedRequestSplits(t *testing.T) {
	for _, n := range []int{1, MaxEmbedTexts - 1, MaxEmbedTexts, MaxEmbedTexts + 1, 2*MaxEmbedTexts + 5, providers.MaxEmbeddingInputs} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			texts := make([]string, n)
			for i := range texts {
				texts[i] = "text " + strconv.Itoa(i)
			}
			in, _ := json.Marshal(map[string]any{"model": "m", "input": texts, "dimensions": 256, "input_type": "query"})
			_, reqs, err := translateEmbed(t, string(in))
			if err != nil {
				t.Fatal(err)
			}
			if want := (n + MaxEmbedTexts - 1) / MaxEmbedTexts; len(reqs) != want {
				t.Fatalf("%d requests, want %d", len(reqs), want)
			}
			var sent []string
			for i, r := range reqs {
				body := gjson.ParseBytes(r.Body)
				got := body.Get("texts").Array()
				if len(got) == 0 || len(got) > MaxEmbedTexts || (i < len(reqs)-1 && len(got) != MaxEmbedTexts) {
					t.Errorf("request %d holds %d texts", i, len(got))
				}
				for _, s := range got {
					sent = append(sent, s.Str)
				}
				if body.Get("output_dimension").Int() != 256 || body.Get("input_type").Str != "search_query" || body.Get("model").Str != embedModel {
					t.Errorf("request %d: %s", i, r.Body)
				}
			}
			if !reflect.DeepEqual(sent, texts) {
				t.Errorf("the texts sent are not the inputs in order")
			}
		})
	}
}

// TestEmbedRequestMatchesSDK decodes every translated request with
// cohere-go's V2EmbedRequest, encodes it again and compares: a field the
// SDK does not know is lost on the way, and input_type (which the SDK
// always writes) must be there.
func TestEmbedRequestMatchesSDK(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, embedDir, ".unified.json") {
		t.Run(name, func(t *testing.T) {
			in := translatortest.ReadFile(t, filepath.Join(embedDir, name+".unified.json"))
			_, reqs, err := translateEmbed(t, string(in))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				if err := embedSDKRoundTrip(r.Body); err != nil {
					t.Errorf("%v\ntranslated:\n%s", err, translatortest.Indent(t, r.Body))
				}
			}
		})
	}
	// The check notices what it is for.
	for _, body := range []string{
		`{"model":"m","input_type":"search_query","texts":["a"],"embedding_types":["float"],"dimensions":256}`,
		`{"model":"m","texts":["a"],"embedding_types":["float"]}`,
		`{"model":"m","input_type":"search_query","input":["a"]}`,
	} {
		if embedSDKRoundTrip([]byte(body)) == nil {
			t.Errorf("the round trip does not notice what is wrong with %s", body)
		}
	}
}

func embedSDKRoundTrip(body []byte) error {
	var req cohere.V2EmbedRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("cohere-go cannot decode the request: %w", err)
	}
	again, err := json.Marshal(&req)
	if err != nil {
		return err
	}
	var a, b any
	_ = json.Unmarshal(body, &a)
	_ = json.Unmarshal(again, &b)
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("cohere-go does not read the request as written; it reads:\n%s", again)
	}
	return nil
}

// embedAnswer reads Cohere answers to one unified request of n string
// inputs and writes the unified answer.
func embedAnswer(t testing.TB, n int, bodies ...[]byte) ([]byte, providers.EmbeddingsResult, error) {
	t.Helper()
	req := providers.EmbeddingsRequest{Model: "my-embed", Texts: make([]string, n)}
	var res providers.EmbeddingsResult
	for i, body := range bodies {
		if err := (Embeddings{}).EmbeddingsResponse(i, http.Header{}, body, &res); err != nil {
			return nil, res, err
		}
	}
	out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
	if !ok {
		return nil, res, errors.New("the answer does not fit the request")
	}
	return out, res, nil
}

// TestEmbedResponseGolden translates every recorded Cohere embed answer
// into the unified answer (numbers, model "my-embed").
func TestEmbedResponseGolden(t *testing.T) {
	translatortest.Golden(t, embedResponseDir, ".cohere.json", ".unified.json", func(t *testing.T, _ string, body []byte) []byte {
		n := len(gjson.GetBytes(body, "texts").Array())
		out, _, err := embedAnswer(t, n, body)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

// TestEmbedResponsesDecodeWithSDK checks that every answer fixture is what
// cohere-go reads: EmbedByTypeResponse (v2), or v1's EmbedResponse union
// for an embeddings_floats answer, with no field the SDK does not know.
func TestEmbedResponsesDecodeWithSDK(t *testing.T) {
	for _, name := range translatortest.GoldenCases(t, embedResponseDir, ".cohere.json") {
		t.Run(name, func(t *testing.T) {
			body := translatortest.ReadFile(t, filepath.Join(embedResponseDir, name+".cohere.json"))
			var extras []map[string]any
			var meta *cohere.ApiMeta
			if gjson.GetBytes(body, "response_type").Exists() {
				var res cohere.EmbedResponse
				if err := json.Unmarshal(body, &res); err != nil || res.EmbeddingsFloats == nil || len(res.EmbeddingsFloats.Embeddings) == 0 {
					t.Fatalf("cohere-go reads %+v (%v)", res, err)
				}
				// The union keeps response_type as its discriminant.
				extra := res.EmbeddingsFloats.GetExtraProperties()
				delete(extra, "response_type")
				extras, meta = append(extras, extra), res.EmbeddingsFloats.Meta
			} else {
				var res cohere.EmbedByTypeResponse
				if err := json.Unmarshal(body, &res); err != nil || res.Embeddings == nil {
					t.Fatalf("cohere-go reads %+v (%v)", res, err)
				}
				if len(res.Embeddings.Float) == 0 && len(res.Embeddings.Base64) == 0 {
					t.Fatal("no vectors")
				}
				extras, meta = append(extras, res.GetExtraProperties(), res.Embeddings.GetExtraProperties()), res.Meta
			}
			if meta == nil {
				t.Fatal("no meta")
			}
			extras = append(extras, meta.GetExtraProperties())
			if meta.BilledUnits != nil {
				extras = append(extras, meta.BilledUnits.GetExtraProperties())
			}
			for _, extra := range extras {
				if len(extra) > 0 {
					t.Errorf("fields cohere-go does not know: %v", extra)
				}
			}
		})
	}
}

// TestEmbedResponseValues: every float32 comes through exactly, from
// decimal numbers and from base64 alike; usage is billed input tokens,
// else the tokens count, summed over the requests of a split.
func TestEmbedResponseValues(t *testing.T) {
	a := []byte(`{"id":"a","embeddings":{"float":[[1.4e-45,-3.4028235e38,0.1]]},"texts":["x"],"meta":{"billed_units":{"input_tokens":3},"tokens":{"input_tokens":9}}}`)
	b := []byte(`{"id":"b","embeddings":{"base64":["AAAAPwAAgL4BAAAA"]},"texts":["y"],"meta":{"tokens":{"input_tokens":4}}}`)
	_, res, err := embedAnswer(t, 2, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{math.Float32frombits(1), -math.MaxFloat32, 0.1}, {0.5, -0.25, math.Float32frombits(1)}}
	if !reflect.DeepEqual(res.Vectors, want) {
		t.Errorf("vectors %v, want %v", res.Vectors, want)
	}
	if res.PromptTokens != 7 || !res.Counted {
		t.Errorf("usage %d (counted %t), want 3 billed + 4", res.PromptTokens, res.Counted)
	}
	_, res, err = embedAnswer(t, 1, []byte(`{"id":"c","embeddings":{"float":[[1]]},"texts":["z"]}`))
	if err != nil || res.Counted {
		t.Errorf("no meta: %v, counted %t", err, res.Counted)
	}
}

// TestEmbedResponseMalformed: an answer that is not Cohere's is an error,
// never a vector made up.
func TestEmbedResponseMalformed(t *testing.T) {
	for _, body := range []string{
		``, `<html>`, `[]`, `{}`, `{"embeddings":{}}`, `{"embeddings":{"float":[]}}`, `{"embeddings":[]}`,
		`{"embeddings":{"float":[[1,"2"]]}}`, `{"embeddings":{"float":[{"a":1}]}}`, `{"embeddings":{"float":[[1e39]]}}`,
		`{"embeddings":{"base64":["***"]}}`, `{"embeddings":{"base64":[7]}}`, `{"embeddings":{"base64":["AAA="]}}`,
		`{"embeddings":{"int8":[[1,2]]}}`,
	} {
		var res providers.EmbeddingsResult
		if err := (Embeddings{}).EmbeddingsResponse(0, http.Header{}, []byte(body), &res); err == nil {
			t.Errorf("%s read as %v", body, res.Vectors)
		}
	}
}

// TestEmbedError: the embed endpoint's failures map as chat's do.
func TestEmbedError(t *testing.T) {
	for _, tc := range []struct {
		status     int
		body       string
		wantStatus int
		code       string
	}{
		{400, `{"id":"x","message":"invalid request: output_dimension is only supported for embed-v4"}`, 400, ""},
		{400, `{"message":"too many tokens: total number of tokens in the prompt cannot exceed 128000"}`, 400, "context_length_exceeded"},
		{429, `{"message":"You are past the per minute request limit"}`, 429, "rate_limit_exceeded"},
		{498, `{"message":"invalid api token sk-secret"}`, 502, "upstream_auth_failed"},
		{500, `<html>oops</html>`, 500, ""},
	} {
		e := Embeddings{}.Error(tc.status, http.Header{}, []byte(tc.body))
		if e.Status != tc.wantStatus || e.Code != tc.code || strings.Contains(e.Message, "sk-secret") || strings.Contains(e.Message, "<html>") {
			t.Errorf("%d %s → %+v", tc.status, tc.body, e)
		}
	}
}

// TestEmbedFake runs the translator against the fake Cohere provider,
// which checks requests as strictly as Cohere: 200 inputs go out as three
// requests, and the answer holds every input's vector, exactly, in input
// order, with the dimensions asked for and the tokens of all three.
func TestEmbedFake(t *testing.T) {
	fake := startFake(t)
	texts := make([]string, 200)
	words := 0
	for i := range texts {
		texts[i] = "passage " + strconv.Itoa(i) + strings.Repeat(" fox", i%5)
		words += 2 + i%5
	}
	for _, tc := range []struct {
		name, inputType string
		dims            int
	}{{"query, 512", "query", 512}, {"default", "", 0}, {"clustering, 1536", "clustering", 1536}} {
		t.Run(tc.name, func(t *testing.T) {
			req := providers.EmbeddingsRequest{Model: "my-embed", Texts: texts, Dimensions: tc.dims, InputType: tc.inputType, Base64: true}
			reqs, err := Embeddings{}.EmbeddingsRequests(&req, "embed-v4.0")
			if err != nil {
				t.Fatal(err)
			}
			before := len(fake.Requests())
			var res providers.EmbeddingsResult
			for i, r := range reqs {
				status, body := providertest.Send(t, http.MethodPost, fake.URL+"/cohere"+r.Path, string(r.Body), "Authorization", "Bearer co-key")
				if status.StatusCode != 200 {
					t.Fatalf("request %d: %d %s", i, status.StatusCode, body)
				}
				if err := (Embeddings{}).EmbeddingsResponse(i, status.Header, []byte(body), &res); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(fake.Requests()) - before; n != 3 {
				t.Errorf("%d requests reached the provider, want 3", n)
			}
			out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
			if !ok || !json.Valid(out) || res.PromptTokens != int64(words) {
				t.Fatalf("answer ok %t, %d tokens (want %d)", ok, res.PromptTokens, words)
			}
			dims := tc.dims
			if dims == 0 {
				dims = providertest.EmbeddingDims
			}
			for i, text := range texts {
				if want := providertest.EmbeddingVector(text, dims); !reflect.DeepEqual(res.Vectors[i], want) {
					t.Fatalf("vector %d is not the provider's", i)
				}
			}
		})
	}
	t.Run("failures", func(t *testing.T) {
		for _, model := range []string{"fail-429", "fail-500", "fail-html"} {
			req := providers.EmbeddingsRequest{Model: "m", Texts: []string{"x"}}
			reqs, _ := Embeddings{}.EmbeddingsRequests(&req, model)
			res, body := providertest.Send(t, http.MethodPost, fake.URL+"/cohere"+reqs[0].Path, string(reqs[0].Body), "Authorization", "Bearer co-key")
			e := Embeddings{}.Error(res.StatusCode, res.Header, []byte(body))
			if e.Status != res.StatusCode || e.Status < 429 || strings.Contains(e.Message, "<html>") || e.Message == "" {
				t.Errorf("%s: %d → %+v", model, res.StatusCode, e)
			}
		}
		// Cohere refuses output_dimension for embed v3 models: its 400
		// reaches the client with Cohere's message.
		req := providers.EmbeddingsRequest{Model: "m", Texts: []string{"x"}, Dimensions: 256}
		reqs, _ := Embeddings{}.EmbeddingsRequests(&req, "embed-english-v3.0")
		res, body := providertest.Send(t, http.MethodPost, fake.URL+"/cohere"+reqs[0].Path, string(reqs[0].Body), "Authorization", "Bearer co-key")
		if e := (Embeddings{}).Error(res.StatusCode, res.Header, []byte(body)); e.Status != 400 || !strings.Contains(e.Message, "output_dimension") {
			t.Errorf("%d → %+v", res.StatusCode, e)
		}
	})
}
