package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
	"github.com/modelgate/modelgate/providers/providertest"
)

const (
	embedDir         = "../../testdata/providers/bedrock/embeddings"
	embedResponseDir = "../../testdata/providers/bedrock/embeddings/response"
)

// embedOptions are an embeddings golden's settings, from <name>.options.json.
type embedOptions struct {
	BaseModels map[string]string `json:"base_models"`
}

func readEmbedOptions(t testing.TB, name string) Embeddings {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(embedDir, name+".options.json"))
	if errors.Is(err, os.ErrNotExist) {
		return Embeddings{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var o embedOptions
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return Embeddings(o)
}

// The unified request's model is the Bedrock model id the translator gets.
func TestEmbeddingsRequestGolden(t *testing.T) {
	translatortest.Golden(t, embedDir, ".unified.json", ".bedrock.json", func(t *testing.T, name string, in []byte) []byte {
		req, err := providers.ValidateEmbeddings(in)
		if err != nil {
			t.Fatalf("the input does not pass ValidateEmbeddings: %v", err)
		}
		reqs, err := readEmbedOptions(t, name).EmbeddingsRequests(&req, req.Model)
		if err != nil {
			t.Fatalf("EmbeddingsRequests: %v", err)
		}
		return translatortest.RequestsJSON(t, reqs)
	})
}

// answersCase is a response golden: the unified request and Bedrock's
// answers to its InvokeModel calls.
type answersCase struct {
	Request json.RawMessage `json:"request"`
	Answers []struct {
		Header map[string]string `json:"header"`
		Body   json.RawMessage   `json:"body"`
	} `json:"answers"`
}

// answer reads a response golden's answers with the translator and writes
// the unified answer.
func answer(t testing.TB, data []byte) ([]byte, error) {
	t.Helper()
	var c answersCase
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	req, err := providers.ValidateEmbeddings(c.Request)
	if err != nil {
		t.Fatal(err)
	}
	var res providers.EmbeddingsResult
	for i, a := range c.Answers {
		h := http.Header{}
		for k, v := range a.Header {
			h.Set(k, v)
		}
		if err := (Embeddings{}).EmbeddingsResponse(i, h, a.Body, &res); err != nil {
			return nil, err
		}
	}
	out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
	if !ok {
		return nil, errors.New("the answers do not fit the request")
	}
	return out, nil
}

func TestEmbeddingsResponseGolden(t *testing.T) {
	translatortest.Golden(t, embedResponseDir, ".bedrock.json", ".unified.json", func(t *testing.T, _ string, data []byte) []byte {
		out, err := answer(t, data)
		if err != nil {
			t.Fatal(err)
		}
		return out
	})
}

func TestEmbeddingsRequests(t *testing.T) {
	texts := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = "t" + strconv.Itoa(i)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		model string
		req   providers.EmbeddingsRequest
		calls int    // the number of requests
		last  string // the last request's body, or "error: <param> <code>"
	}{
		{"titan one call per input", "amazon.titan-embed-text-v2:0", providers.EmbeddingsRequest{Texts: texts(3)}, 3, `{"inputText":"t2"}`},
		{"titan dimensions", "amazon.titan-embed-text-v2:0", providers.EmbeddingsRequest{Texts: texts(1), Dimensions: 1024}, 1, `{"inputText":"t0","dimensions":1024}`},
		{"titan other dimensions", "amazon.titan-embed-text-v2:0", providers.EmbeddingsRequest{Texts: texts(1), Dimensions: 64}, 0, "error: dimensions invalid_value"},
		{"titan g1 dimensions", "amazon.titan-embed-g1-text-02", providers.EmbeddingsRequest{Texts: texts(1), Dimensions: 256}, 0, "error: dimensions unsupported_parameter"},
		{"titan token ids", "amazon.titan-embed-text-v2:0", providers.EmbeddingsRequest{Tokens: [][]int64{{1, 2}}}, 0, "error: input unsupported_parameter"},
		{"cohere 96 a call", "cohere.embed-v4:0", providers.EmbeddingsRequest{Texts: texts(97), InputType: "document"}, 2,
			`{"texts":["t96"],"input_type":"search_document","embedding_types":["float"]}`},
		{"cohere v4 dimensions", "global.cohere.embed-v4:0", providers.EmbeddingsRequest{Texts: texts(1), Dimensions: 1536}, 1,
			`{"texts":["t0"],"input_type":"search_document","embedding_types":["float"],"output_dimension":1536}`},
		{"cohere v4 other dimensions", "cohere.embed-v4:0", providers.EmbeddingsRequest{Texts: texts(1), Dimensions: 768}, 0, "error: dimensions invalid_value"},
		{"cohere v3 dimensions", "cohere.embed-english-v3", providers.EmbeddingsRequest{Texts: texts(1), Dimensions: 1024}, 0, "error: dimensions unsupported_parameter"},
		{"cohere query", "cohere.embed-english-v3", providers.EmbeddingsRequest{Texts: texts(1), InputType: "query", User: "u"}, 1,
			`{"texts":["t0"],"input_type":"search_query","embedding_types":["float"]}`},
		{"cohere token ids", "cohere.embed-v4:0", providers.EmbeddingsRequest{Tokens: [][]int64{{1}}}, 0, "error: input unsupported_parameter"},
		{"a chat model", "anthropic.claude-3-haiku-20240307-v1:0", providers.EmbeddingsRequest{Texts: texts(1)}, 0, "error: model invalid_value"},
		{"an ARN without base_model", "arn:aws:bedrock:us-east-1:1:application-inference-profile/x", providers.EmbeddingsRequest{Texts: texts(1)}, 0, "error: model invalid_value"},
		{"titan image", "amazon.titan-embed-image-v1", providers.EmbeddingsRequest{Texts: texts(1)}, 0, "error: model invalid_value"},
		{"a foundation model ARN", "arn:aws:bedrock:us-east-1::foundation-model/cohere.embed-v4:0", providers.EmbeddingsRequest{Texts: texts(1)}, 1,
			`{"texts":["t0"],"input_type":"search_document","embedding_types":["float"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := Embeddings{}.EmbeddingsRequests(&tc.req, tc.model)
			if want, ok := strings.CutPrefix(tc.last, "error: "); ok {
				param, code, _ := strings.Cut(want, " ")
				var e *providers.Error
				if !errors.As(err, &e) || e.Status != 400 || e.Param != param || e.Code != code {
					t.Fatalf("error %v (%+v), want %s %s", err, e, param, code)
				}
				return
			}
			if err != nil || len(reqs) != tc.calls {
				t.Fatalf("%d requests, %v", len(reqs), err)
			}
			wantPath, _ := InvokePath(tc.model)
			for _, r := range reqs {
				if r.Path != wantPath || !json.Valid(r.Body) {
					t.Errorf("path %s body %s", r.Path, r.Body)
				}
			}
			if got := string(reqs[len(reqs)-1].Body); got != tc.last {
				t.Errorf("last body %s\nwant      %s", got, tc.last)
			}
		})
	}
	if p, _ := InvokePath("amazon.titan-embed-text-v2:0"); p != "/model/amazon.titan-embed-text-v2%3A0/invoke" {
		t.Errorf("InvokePath = %s", p)
	}
	if _, err := InvokePath(".."); err == nil {
		t.Error(`InvokePath("..") accepted`)
	}
}

func TestEmbeddingsResponseErrors(t *testing.T) {
	for _, body := range []string{
		`not json`, `[1]`, `{}`, `{"embedding":"x"}`, `{"embedding":[1,"a"]}`, `{"embeddings":{"int8":[[1]]}}`,
		`{"embeddings":[]}`, `{"embeddings":[[1],"x"]}`, `{"embeddings":{"float":[[1],[true]]}}`,
	} {
		var res providers.EmbeddingsResult
		if err := (Embeddings{}).EmbeddingsResponse(0, http.Header{}, []byte(body), &res); err == nil {
			t.Errorf("%s accepted: %v", body, res.Vectors)
		}
	}
	// A count that is not a count is no usage.
	var res providers.EmbeddingsResult
	h := http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"many"}}
	if err := (Embeddings{}).EmbeddingsResponse(0, h, []byte(`{"embeddings":[[1]],"meta":{"billed_units":{"input_tokens":-3}}}`), &res); err != nil || res.Counted {
		t.Errorf("%v %+v", err, res)
	}
}

func TestEmbeddingsError(t *testing.T) {
	h := http.Header{"X-Amzn-Errortype": {"ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}}
	e := Embeddings{}.Error(400, h, []byte(`{"message":"Malformed input request: #/texts: expected maxItems: 96, actual: 97, please reformat your input and try again."}`))
	if e.Status != 400 || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "maxItems") {
		t.Errorf("%+v", e)
	}
	h.Set("X-Amzn-Errortype", "ThrottlingException")
	if e := (Embeddings{}).Error(400, h, []byte(`{"message":"slow down"}`)); e.Status != 429 || e.Code != "rate_limit_exceeded" {
		t.Errorf("%+v", e)
	}
}

// TestEmbeddingsAgainstFake sends translated requests to the fake, signed
// as the SDK signs them, and checks every value of every vector and the
// usage of the unified answer.
func TestEmbeddingsAgainstFake(t *testing.T) {
	fake := startFake(t)
	texts := []string{"the red fox", "a blue whale swims far", "ünïcødé \"quoted\""}
	many := make([]string, 100)
	for i := range many {
		many[i] = "text number " + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		model  string
		texts  []string
		dims   int
		want   int // the vector length
		tokens int64
	}{
		{"amazon.titan-embed-text-v2:0", texts, 256, 256, 10},
		{"amazon.titan-embed-text-v2:0", texts[:1], 0, 1024, 3},
		{"amazon.titan-embed-text-v1", texts[1:], 0, 1536, 7},
		{"cohere.embed-v4:0", texts, 512, 512, 10},
		{"us.cohere.embed-v4:0", many, 0, 1536, 300},
		{"cohere.embed-english-v3", texts, 0, 1024, 10},
	} {
		req := providers.EmbeddingsRequest{Model: tc.model, Texts: tc.texts, Dimensions: tc.dims, Base64: true}
		reqs, err := Embeddings{}.EmbeddingsRequests(&req, tc.model)
		if err != nil {
			t.Fatal(err)
		}
		var res providers.EmbeddingsResult
		for i, r := range reqs {
			status, header, body := sendSigned(t, fake, r)
			if status != 200 {
				t.Fatalf("%s: %d %s", tc.model, status, body)
			}
			if err := (Embeddings{}).EmbeddingsResponse(i, header, body, &res); err != nil {
				t.Fatal(err)
			}
		}
		out, ok := providers.EmbeddingsAnswer(nil, &req, &res)
		if !ok || !res.Counted || res.PromptTokens != tc.tokens {
			t.Fatalf("%s: ok %v, usage %d (%v)", tc.model, ok, res.PromptTokens, res.Counted)
		}
		for i, text := range tc.texts {
			want := providertest.EmbeddingVector(text, tc.want)
			got := res.Vectors[i]
			if len(got) != len(want) {
				t.Fatalf("%s: vector %d has %d values, want %d", tc.model, i, len(got), len(want))
			}
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("%s: vector %d value %d is %v, want %v", tc.model, i, j, got[j], want[j])
				}
			}
		}
		if gjson.GetBytes(out, "usage.prompt_tokens").Int() != tc.tokens || gjson.GetBytes(out, "data.0.embedding").Type != gjson.String {
			t.Errorf("%s: answer %.200s", tc.model, out)
		}
	}

	// The fake's refusal comes back as the unified error.
	req := providers.EmbeddingsRequest{Texts: []string{strings.Repeat("x", 2049)}}
	reqs, _ := Embeddings{}.EmbeddingsRequests(&req, "cohere.embed-english-v3")
	status, header, body := sendSigned(t, fake, reqs[0])
	if e := (Embeddings{}).Error(status, header, body); e.Status != 400 || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "2048") {
		t.Errorf("%d %+v", status, e)
	}
}

// sendSigned sends one translated request to the fake, signed.
func sendSigned(t *testing.T, fake *providertest.Server, r providers.Request) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fake.URL+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.URL.RawPath = r.Path
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	sum := sha256.Sum256(r.Body)
	if err := v4.NewSigner().SignHTTP(context.Background(), fakeCreds, req, hex.EncodeToString(sum[:]), "bedrock", "us-west-2", time.Now()); err != nil {
		t.Fatal(err)
	}
	res, body := providertest.Do(t, req)
	return res.StatusCode, res.Header, body
}
