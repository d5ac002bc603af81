package providertest

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// bedrockInvokePath is the InvokeModel path of a model, escaped as the AWS
// SDK escapes it.
func bedrockInvokePath(model string) string {
	return "/model/" + strings.ReplaceAll(url.PathEscape(model), ":", "%3A") + "/invoke"
}

// bedrockInvoke sends a signed InvokeModel request and returns the answer.
func bedrockInvoke(t *testing.T, s *Server, model, body string) (*http.Response, gjson.Result) {
	t.Helper()
	res, got := do(t, signed(t, s, bedrockInvokePath(model), body, bedrockCreds, time.Now()))
	if !gjson.Valid(got) {
		t.Fatalf("%d: not JSON: %s", res.StatusCode, got)
	}
	return res, gjson.Parse(got)
}

// bedrockSameVector reports whether v holds exactly EmbeddingVector(text, dims).
func bedrockSameVector(v gjson.Result, text string, dims int) bool {
	want := EmbeddingVector(text, dims)
	got := v.Array()
	if len(got) != dims {
		return false
	}
	for i, x := range got {
		if float32(x.Float()) != want[i] {
			return false
		}
	}
	return true
}

func TestBedrockInvokeTitan(t *testing.T) {
	s := newBedrock(t)
	for _, tc := range []struct {
		model, body string
		dims        int
		byType      bool
	}{
		{"amazon.titan-embed-text-v2:0", `{"inputText":"the red fox","dimensions":256}`, 256, true},
		{"amazon.titan-embed-text-v2:0", `{"inputText":"the red fox","normalize":true}`, 1024, true},
		{"amazon.titan-embed-text-v1", `{"inputText":"the red fox"}`, 1536, false},
		{"arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0", `{"inputText":"the red fox","dimensions":512}`, 512, true},
		// An application inference profile: the body says which model.
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", `{"inputText":"the red fox"}`, 1024, true},
	} {
		res, got := bedrockInvoke(t, s, tc.model, tc.body)
		if res.StatusCode != 200 || !bedrockSameVector(got.Get("embedding"), "the red fox", tc.dims) || got.Get("inputTextTokenCount").Int() != 3 ||
			res.Header.Get("X-Amzn-Bedrock-Input-Token-Count") != "3" || got.Get("embeddingsByType.float").Exists() != tc.byType {
			t.Errorf("%s %s: %d %v %.200s", tc.model, tc.body, res.StatusCode, res.Header, got.Raw)
		}
	}
	res, got := bedrockInvoke(t, s, "amazon.titan-embed-text-v2:0", `{"inputText":"a b","embeddingTypes":["binary","float"],"dimensions":256}`)
	if res.StatusCode != 200 || len(got.Get("embeddingsByType.binary").Array()) != 32 || !bedrockSameVector(got.Get("embeddingsByType.float"), "a b", 256) {
		t.Errorf("binary: %.300s", got.Raw)
	}

	for _, tc := range []struct{ model, body, msg string }{
		{"amazon.titan-embed-text-v2:0", `{"inputText":"x","dimensions":64}`, "#/dimensions: 64 is not a valid enum value"},
		{"amazon.titan-embed-text-v1", `{"inputText":"x","dimensions":256}`, "extraneous key [dimensions]"},
		{"amazon.titan-embed-text-v2:0", `{"texts":["x"]}`, "extraneous key [texts]"},
		{"amazon.titan-embed-text-v2:0", `{"normalize":true}`, "required key [inputText] not found"},
		{"amazon.titan-embed-text-v2:0", `{"inputText":""}`, "#/inputText"},
		{"amazon.titan-embed-text-v2:0", `{"inputText":"x","embeddingTypes":["int8"]}`, "#/embeddingTypes"},
		{"amazon.titan-embed-text-v2:0", `[1]`, "Malformed input request"},
		{"anthropic.claude-3-haiku-20240307-v1:0", `{"inputText":"x"}`, "required key [anthropic_version] not found"},
		{"meta.llama3-8b-instruct-v1:0", `{"inputText":"x"}`, "model identifier is invalid"},
	} {
		res, got := bedrockInvoke(t, s, tc.model, tc.body)
		if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), "ValidationException:") || !strings.Contains(got.Get("message").Str, tc.msg) {
			t.Errorf("%s %s: %d %s", tc.model, tc.body, res.StatusCode, got.Raw)
		}
	}
}

func TestBedrockInvokeCohere(t *testing.T) {
	s := newBedrock(t)
	texts := `["the red fox","a blue whale swims far"]`
	for _, tc := range []struct {
		model, body string
		dims        int
		byType      bool
	}{
		{"cohere.embed-v4:0", `{"texts":` + texts + `,"input_type":"search_document","embedding_types":["float"],"output_dimension":256}`, 256, true},
		{"us.cohere.embed-v4:0", `{"texts":` + texts + `,"input_type":"search_query"}`, 1536, false},
		{"cohere.embed-english-v3", `{"texts":` + texts + `,"input_type":"classification","truncate":"END","embedding_types":["float","int8"]}`, 1024, true},
		{"cohere.embed-multilingual-v3", `{"texts":` + texts + `,"input_type":"clustering"}`, 1024, false},
	} {
		res, got := bedrockInvoke(t, s, tc.model, tc.body)
		vecs := got.Get("embeddings")
		if tc.byType {
			vecs = got.Get("embeddings.float")
		}
		if res.StatusCode != 200 || len(vecs.Array()) != 2 || !bedrockSameVector(vecs.Get("0"), "the red fox", tc.dims) ||
			!bedrockSameVector(vecs.Get("1"), "a blue whale swims far", tc.dims) || res.Header.Get("X-Amzn-Bedrock-Input-Token-Count") != "8" ||
			got.Get("texts.1").Str != "a blue whale swims far" || got.Get("id").Str == "" ||
			got.Get("response_type").Str != map[bool]string{true: "embeddings_by_type", false: "embeddings_floats"}[tc.byType] {
			t.Errorf("%s %s: %d %v %.200s", tc.model, tc.body, res.StatusCode, res.Header, got.Raw)
		}
	}
	_, got := bedrockInvoke(t, s, "cohere.embed-english-v3", `{"texts":["a b"],"input_type":"search_document","embedding_types":["int8","uint8","binary","ubinary"]}`)
	if len(got.Get("embeddings.int8.0").Array()) != 1024 || len(got.Get("embeddings.ubinary.0").Array()) != 128 ||
		got.Get("embeddings.uint8.0.0").Int() != got.Get("embeddings.int8.0.0").Int()+128 {
		t.Errorf("typed embeddings: %.300s", got.Raw)
	}

	many := `["` + strings.TrimSuffix(strings.Repeat(`x","`, 97), `","`) + `"]`
	for _, tc := range []struct{ model, body, msg string }{
		{"cohere.embed-v4:0", `{"texts":["x"]}`, "required key [input_type] not found"},
		{"cohere.embed-v4:0", `{"texts":["x"],"input_type":"query"}`, `#/input_type: "query"`},
		{"cohere.embed-v4:0", `{"texts":["x"],"input_type":"search_query","output_dimension":300}`, "#/output_dimension"},
		{"cohere.embed-english-v3", `{"texts":["x"],"input_type":"search_query","output_dimension":256}`, "extraneous key [output_dimension]"},
		{"cohere.embed-english-v3", `{"texts":["x"],"input_type":"search_query","truncate":"LEFT"}`, "#/truncate"},
		{"cohere.embed-v4:0", `{"texts":` + many + `,"input_type":"search_query"}`, "at most 96"},
		{"cohere.embed-v4:0", `{"texts":[],"input_type":"search_query"}`, "at least 1"},
		{"cohere.embed-v4:0", `{"input_type":"search_query"}`, "required key [texts]"},
		{"cohere.embed-v4:0", `{"texts":["x"],"input_type":"search_query","embedding_types":["base64"]}`, "#/embedding_types"},
		{"cohere.embed-v4:0", `{"texts":["x"],"input_type":"search_query","model":"m"}`, "extraneous key [model]"},
	} {
		res, got := bedrockInvoke(t, s, tc.model, tc.body)
		if res.StatusCode != 400 || !strings.Contains(got.Get("message").Str, tc.msg) {
			t.Errorf("%s %s: %d %s", tc.model, tc.body, res.StatusCode, got.Raw)
		}
	}
}

func TestBedrockInvokeAuth(t *testing.T) {
	s := newBedrock(t)
	const model, body = "amazon.titan-embed-text-v2:0", `{"inputText":"hi"}`
	// The signature covers the body and the path's escaping.
	req := signed(t, s, bedrockInvokePath(model), body, bedrockCreds, time.Now())
	req.Body, req.ContentLength = http.NoBody, 0
	tampered := signed(t, s, bedrockInvokePath(model), `{"inputText":"ho"}`, bedrockCreds, time.Now())
	tampered.Body = NewRequest(t, "POST", s.URL, body).Body
	unescaped := signed(t, s, "/model/"+model+"/invoke", body, bedrockCreds, time.Now())
	unescaped.URL.RawPath = bedrockInvokePath(model) // sent escaped, signed unescaped
	for name, r := range map[string]*http.Request{"changed body": tampered, "path signed otherwise": unescaped} {
		res, got := do(t, r)
		if res.StatusCode != 403 || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), "InvalidSignatureException") {
			t.Errorf("%s: %d %s", name, res.StatusCode, got)
		}
	}

	// Bedrock API keys: refused by a fake that checks signatures unless
	// configured, then only that key.
	res, _ := do(t, NewRequest(t, "POST", s.URL+bedrockInvokePath(model), body, "Authorization", "Bearer ABSKkey"))
	if res.StatusCode != 403 {
		t.Errorf("an API key where none is configured: %d", res.StatusCode)
	}
	k := Start(t, Options{Keys: map[string]string{"bedrock": bedrockKeyID + ":" + bedrockSecret, "bedrock_api_key": "ABSKkey"}})
	for key, want := range map[string]int{"ABSKkey": 200, "ABSKother": 403} {
		res, got := do(t, NewRequest(t, "POST", k.URL+bedrockInvokePath(model), body, "Authorization", "Bearer "+key))
		if res.StatusCode != want {
			t.Errorf("API key %s: %d %s", key, res.StatusCode, got)
		}
	}
	// And a fake with no keys takes any.
	open := Start(t, Options{})
	if res, got := do(t, NewRequest(t, "POST", open.URL+bedrockInvokePath(model), body, "Authorization", "Bearer anything")); res.StatusCode != 200 {
		t.Errorf("open fake: %d %s", res.StatusCode, got)
	}
}

func TestBedrockInvokeScripted(t *testing.T) {
	s := newBedrock(t)
	for model, status := range map[string]int{"fail-429": 429, "cohere.embed-v4:0-fail-500": 500, "amazon.titan-embed-text-v2:0/fail-529": 503} {
		body := `{"inputText":"x"}`
		if strings.Contains(model, "cohere") {
			body = `{"texts":["x"],"input_type":"search_query"}`
		}
		res, got := bedrockInvoke(t, s, model, body)
		if res.StatusCode != status || got.Get("message").Str == "" || res.Header.Get("X-Amzn-Errortype") == "" {
			t.Errorf("%s: %d %s", model, res.StatusCode, got.Raw)
		}
	}
	// A malformed body is refused before the script runs.
	if res, _ := bedrockInvoke(t, s, "fail-429", `{"inputText":"x","bogus":1}`); res.StatusCode != 400 {
		t.Errorf("fail-429 with a bad body: %d", res.StatusCode)
	}
}
