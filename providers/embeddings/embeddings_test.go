package embeddings

import (
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

func TestEmbeddingsRequests(t *testing.T) {
	texts := &providers.EmbeddingsRequest{Texts: []string{"red fox", "é\"x"}, Dimensions: 256, InputType: "query", User: "u-1", Base64: true}
	tokens := &providers.EmbeddingsRequest{Tokens: [][]int64{{1, 2}, {3}}}
	for _, tc := range []struct {
		name string
		f    Format
		req  *providers.EmbeddingsRequest
		want string // the body, or "error: <param>"
	}{
		{"openai", OpenAI, texts, `{"model":"m","input":["red fox","é\"x"],"encoding_format":"base64","dimensions":256,"user":"u-1"}`},
		{"openai float", OpenAI, &providers.EmbeddingsRequest{Texts: []string{"a"}}, `{"model":"m","input":["a"],"encoding_format":"float"}`},
		{"openai tokens", OpenAI, tokens, `{"model":"m","input":[[1,2],[3]],"encoding_format":"float"}`},
		{"voyage", Voyage, texts, `{"model":"m","input":["red fox","é\"x"],"encoding_format":"base64","output_dimension":256,"input_type":"query"}`},
		// Providers that do not take encoding_format base64 are asked for
		// numbers, which the host encodes.
		{"together asked for base64", Together, &providers.EmbeddingsRequest{Texts: []string{"a"}, Base64: true}, `{"model":"m","input":["a"],"encoding_format":"float"}`},
		{"jina", Jina, texts, `{"model":"m","input":["red fox","é\"x"],"encoding_format":"float","dimensions":256,"task":"retrieval.query"}`},
		{"jina own task", Jina, &providers.EmbeddingsRequest{Texts: []string{"a"}, InputType: "code.query"}, `{"model":"m","input":["a"],"encoding_format":"float","task":"code.query"}`},
		{"mistral", Mistral, &providers.EmbeddingsRequest{Texts: []string{"a"}, Dimensions: 8}, `{"model":"m","input":["a"],"encoding_format":"float","output_dimension":8}`},
		{"tei refuses dimensions", TEI, texts, "error: dimensions"},
		{"together refuses token ids", Together, tokens, "error: input (token ids)"},
		{"ollama drops user and input type", Ollama, &providers.EmbeddingsRequest{Texts: []string{"a"}, User: "u", InputType: "query"}, `{"model":"m","input":["a"],"encoding_format":"float"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := tc.f.EmbeddingsRequests(tc.req, "m")
			if param, ok := cutError(tc.want); ok {
				e, isErr := errors.AsType[*providers.Error](err)
				if !isErr || e.Status != 400 || e.Param != param || e.Code != "unsupported_parameter" {
					t.Fatalf("error %v, want unsupported %s", err, param)
				}
				return
			}
			if err != nil || len(reqs) != 1 {
				t.Fatal(err)
			}
			if string(reqs[0].Body) != tc.want || reqs[0].Path != tc.f.Path {
				t.Errorf("%s %s\nwant %s", reqs[0].Path, reqs[0].Body, tc.want)
			}
		})
	}
}

func cutError(s string) (string, bool) {
	if len(s) > 7 && s[:7] == "error: " {
		return s[7:], true
	}
	return "", false
}

func TestEmbeddingsResponse(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		vectors    [][]float32
		tokens     int64
		counted    bool
		bad        bool
	}{
		{"in order", `{"data":[{"index":0,"embedding":[0.5,1]},{"index":1,"embedding":[2,3]}],"usage":{"prompt_tokens":4,"total_tokens":4}}`,
			[][]float32{{0.5, 1}, {2, 3}}, 4, true, false},
		{"out of order", `{"data":[{"index":1,"embedding":[2,3]},{"index":0,"embedding":[0.5,1]}],"usage":{"total_tokens":9}}`,
			[][]float32{{0.5, 1}, {2, 3}}, 9, true, false},
		{"base64 from a server that sends it anyway", `{"data":[{"index":0,"embedding":"AAAAPw=="}]}`, [][]float32{{0.5}}, 0, false, false},
		{"duplicate index", `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`, nil, 0, false, true},
		{"index out of range", `{"data":[{"index":3,"embedding":[1]}]}`, nil, 0, false, true},
		{"no data", `{"data":[]}`, nil, 0, false, true},
		{"not JSON", `<html>`, nil, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res providers.EmbeddingsResult
			err := OpenAI.EmbeddingsResponse(0, http.Header{}, []byte(tc.body), &res)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %v", res.Vectors)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Vectors) != len(tc.vectors) || res.PromptTokens != tc.tokens || res.Counted != tc.counted {
				t.Fatalf("%+v", res)
			}
			for i := range tc.vectors {
				for j := range tc.vectors[i] {
					if res.Vectors[i][j] != tc.vectors[i][j] {
						t.Errorf("vector %d: %v", i, res.Vectors[i])
					}
				}
			}
		})
	}
}

// TestKeepBase64: a provider's base64 kept as it is (the client asked for
// base64 too) makes exactly the answer that decoding it and encoding it
// again makes, in both encodings; base64 that is not what the gateway
// would write (line breaks, bits beyond the data) is read as values and
// written anew.
func TestKeepBase64(t *testing.T) {
	for _, body := range []string{
		`{"object":"list","data":[{"object":"embedding","index":1,"embedding":"AAAAPwAAgL8="},{"index":0,"embedding":"AQAAAP//f38="}],"model":"m","usage":{"prompt_tokens":4,"total_tokens":4}}`,
		`{"data":[{"index":0,"embedding":"AAAA\nPw=="}]}`,
		`{"data":[{"index":0,"embedding":"AAAAPx=="}]}`,
		`{"data":[{"index":0,"embedding":"AAAAPw\u003d="}]}`,
		`{"data":[{"index":0,"embedding":""}]}`,
		`{"data":[{"index":0,"embedding":[0.5,-1]},{"index":1,"embedding":"AAAAPw=="}]}`,
	} {
		kept, decoded := readBoth(t, []byte(body))
		if kept == nil {
			t.Fatalf("%s not read", body)
		}
		for _, b64 := range []bool{true, false} {
			req := providers.EmbeddingsRequest{Model: "c", Texts: make([]string, len(kept.Vectors)), Base64: b64}
			a, okA := providers.EmbeddingsAnswer(nil, &req, kept)
			b, okB := providers.EmbeddingsAnswer(nil, &req, decoded)
			if !okA || !okB || string(a) != string(b) {
				t.Errorf("%s, base64 %v:\nkept    %s\ndecoded %s", body, b64, a, b)
			}
		}
	}
	kept, _ := readBoth(t, []byte(`{"data":[{"index":0,"embedding":"AAAAPwAAgL8="}]}`))
	if kept.Encoded == nil || string(kept.Encoded[0]) != "AAAAPwAAgL8=" {
		t.Errorf("canonical base64 not kept: %+v", kept)
	}
}

// readBoth reads body with and without KeepBase64; nil when it is refused
// (by both, or the test fails).
func readBoth(t *testing.T, body []byte) (kept, decoded *providers.EmbeddingsResult) {
	kept, decoded = &providers.EmbeddingsResult{KeepBase64: true}, &providers.EmbeddingsResult{}
	errA := OpenAI.EmbeddingsResponse(0, nil, body, kept)
	errB := OpenAI.EmbeddingsResponse(0, nil, body, decoded)
	if (errA == nil) != (errB == nil) {
		t.Fatalf("%s: kept %v, decoded %v", body, errA, errB)
	}
	if errA != nil {
		return nil, nil
	}
	return kept, decoded
}

func FuzzEmbeddingsResponse(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":1,"embedding":[2,3]},{"index":0,"embedding":"AAAAPw=="}],"usage":{"total_tokens":9}}`))
	f.Add([]byte(`{"data":[{"index":0,"embedding":"AAAA\nPw=="}],"usage":{"prompt_tokens":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		kept, res := readBoth(t, body)
		if res == nil {
			return
		}
		for i, v := range res.Vectors {
			if v == nil {
				t.Fatalf("vector %d missing", i)
			}
		}
		req := providers.EmbeddingsRequest{Texts: make([]string, len(res.Vectors)), Base64: len(body)%2 == 0}
		out, ok := providers.EmbeddingsAnswer(nil, &req, res)
		if !ok || !gjson.ValidBytes(out) {
			t.Fatalf("%s", out)
		}
		if again, ok := providers.EmbeddingsAnswer(nil, &req, kept); !ok || string(again) != string(out) {
			t.Fatalf("kept base64 answers\n%s\nnot\n%s", again, out)
		}
	})
}

// BenchmarkEmbeddings64 is the gateway's own work for one request of 64
// inputs of 1,536 dimensions: writing the provider's request, reading its
// answer of decimal numbers, writing the base64 answer.
func BenchmarkEmbeddings64(b *testing.B) {
	req := &providers.EmbeddingsRequest{Model: "m", Base64: true}
	answer := []byte(`{"object":"list","data":[`)
	for i := range 64 {
		req.Texts = append(req.Texts, "the quick brown fox jumps over the lazy dog")
		if i > 0 {
			answer = append(answer, ',')
		}
		answer = append(answer, `{"object":"embedding","index":`...)
		answer = strconv.AppendInt(answer, int64(i), 10)
		answer = append(answer, `,"embedding":[`...)
		for j := range 1536 {
			if j > 0 {
				answer = append(answer, ',')
			}
			answer = append(answer, "-0.0072897403"...)
		}
		answer = append(answer, "]}"...)
	}
	answer = append(answer, `],"model":"m","usage":{"prompt_tokens":576,"total_tokens":576}}`...)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenAI.EmbeddingsRequests(req, "m"); err != nil {
			b.Fatal(err)
		}
		var res providers.EmbeddingsResult
		if err := OpenAI.EmbeddingsResponse(0, nil, answer, &res); err != nil {
			b.Fatal(err)
		}
		if _, ok := providers.EmbeddingsAnswer(nil, req, &res); !ok {
			b.Fatal("answer")
		}
	}
}
