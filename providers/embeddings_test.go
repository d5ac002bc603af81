package providers

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestValidateEmbeddings(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		param      string // "": valid
		texts      int
		tokens     int
	}{
		{"string", `{"model":"m","input":"hi"}`, "", 1, 0},
		{"strings", `{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u","input_type":"query"}`, "", 2, 0},
		{"token ids", `{"model":"m","input":[1,2,3]}`, "", 0, 1},
		{"token arrays", `{"model":"m","input":[[1,2],[3]]}`, "", 0, 2},
		{"no model", `{"input":"hi"}`, "model", 0, 0},
		{"no input", `{"model":"m"}`, "input", 0, 0},
		{"empty string", `{"model":"m","input":""}`, "input", 0, 0},
		{"empty array", `{"model":"m","input":[]}`, "input", 0, 0},
		{"empty item", `{"model":"m","input":["a",""]}`, "input[1]", 0, 0},
		{"mixed", `{"model":"m","input":["a",1]}`, "input[1]", 0, 0},
		{"negative token", `{"model":"m","input":[1,-2]}`, "input", 0, 0},
		{"fractional dims", `{"model":"m","input":"a","dimensions":2.5}`, "dimensions", 0, 0},
		{"zero dims", `{"model":"m","input":"a","dimensions":0}`, "dimensions", 0, 0},
		{"bad encoding", `{"model":"m","input":"a","encoding_format":"int8"}`, "encoding_format", 0, 0},
		{"too many", `{"model":"m","input":[` + strings.Repeat(`"a",`, MaxEmbeddingInputs) + `"a"]}`, "input", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ValidateEmbeddings([]byte(tc.body))
			if tc.param != "" {
				e, ok := errors.AsType[*Error](err)
				if !ok || e.Status != 400 || e.Param != tc.param {
					t.Fatalf("error %v, want 400 on %s", err, tc.param)
				}
				return
			}
			if err != nil || len(req.Texts) != tc.texts || len(req.Tokens) != tc.tokens {
				t.Fatalf("%+v %v", req, err)
			}
		})
	}
}

// TestEmbeddingsEstimate: a provider that counts no tokens gets the
// request's estimate in the answer, never 0 (which would price it free).
func TestEmbeddingsEstimate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  EmbeddingsRequest
		want int64
	}{
		{"ascii", EmbeddingsRequest{Texts: []string{"four", "eight chr"}}, 1 + 3},
		{"other alphabets", EmbeddingsRequest{Texts: []string{"привет"}}, 3},
		{"cjk", EmbeddingsRequest{Texts: []string{"日本語"}}, 3},
		{"token ids are exact", EmbeddingsRequest{Tokens: [][]int64{{1, 2, 3}, {4}}}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &EmbeddingsResult{}
			for range tc.req.Inputs() {
				res.Vectors = append(res.Vectors, []float32{1})
			}
			out, ok := EmbeddingsAnswer(nil, &tc.req, res)
			if !ok {
				t.Fatalf("%s", out)
			}
			if got := gjson.GetBytes(out, "usage.prompt_tokens").Int(); got != tc.want {
				t.Errorf("prompt_tokens %d, want %d", got, tc.want)
			}
			res.Counted, res.PromptTokens = true, 0
			out, _ = EmbeddingsAnswer(nil, &tc.req, res)
			if got := gjson.GetBytes(out, "usage.prompt_tokens").Int(); got != 0 {
				t.Errorf("a counted 0 became %d", got)
			}
		})
	}
}

// TestEmbeddingsAnswerExact: every float32 — subnormals, negative zero,
// the extremes — survives both encodings bit for bit.
func TestEmbeddingsAnswerExact(t *testing.T) {
	vec := []float32{0, float32(math.Copysign(0, -1)), 1, -1, math.Float32frombits(1), math.MaxFloat32, -math.SmallestNonzeroFloat32,
		0.1, 1.0 / 3, -0.0072897403, 123456.789}
	for _, b64 := range []bool{false, true} {
		req := &EmbeddingsRequest{Model: "client/model", Texts: []string{"a", "b"}, Base64: b64}
		res := &EmbeddingsResult{Vectors: [][]float32{vec, vec[:3]}, PromptTokens: 7, Counted: true}
		out, ok := EmbeddingsAnswer(nil, req, res)
		if !ok || !gjson.ValidBytes(out) {
			t.Fatalf("%s", out)
		}
		root := gjson.ParseBytes(out)
		if root.Get("model").Str != "client/model" || root.Get("usage.prompt_tokens").Int() != 7 || root.Get("usage.total_tokens").Int() != 7 {
			t.Errorf("%s", out)
		}
		for i, d := range root.Get("data").Array() {
			want := res.Vectors[i]
			var got []float32
			if b64 {
				raw, err := base64.StdEncoding.DecodeString(d.Get("embedding").Str)
				if err != nil || len(raw) != 4*len(want) {
					t.Fatalf("base64 %q: %v", d.Get("embedding").Str, err)
				}
				for j := 0; j < len(raw); j += 4 {
					got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
				}
			} else {
				for _, x := range d.Get("embedding").Array() {
					f, err := strconv.ParseFloat(x.Raw, 32)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, float32(f))
				}
			}
			if d.Get("index").Int() != int64(i) || len(got) != len(want) {
				t.Fatalf("item %d: %s", i, d.Raw)
			}
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Errorf("base64=%v vector %d value %d: %v, want %v", b64, i, j, got[j], want[j])
				}
			}
		}
	}
	// A provider that sent the wrong number of vectors, or ignored the
	// dimensions asked for, has answered wrongly.
	if _, ok := EmbeddingsAnswer(nil, &EmbeddingsRequest{Texts: []string{"a", "b"}}, &EmbeddingsResult{Vectors: [][]float32{vec}}); ok {
		t.Error("one vector for two inputs accepted")
	}
	if _, ok := EmbeddingsAnswer(nil, &EmbeddingsRequest{Texts: []string{"a"}, Dimensions: 4}, &EmbeddingsResult{Vectors: [][]float32{vec}}); ok {
		t.Error("a longer vector than the dimensions asked for accepted")
	}
}

func TestAppendVector(t *testing.T) {
	var res EmbeddingsResult
	if err := res.AppendVector(gjson.Parse(`[0.5,-1e-45,3.4028235e38,1]`)); err != nil {
		t.Fatal(err)
	}
	if v := res.Vectors[0]; len(v) != 4 || v[1] != -math.Float32frombits(1) || v[2] != math.MaxFloat32 {
		t.Errorf("%v", v)
	}
	for _, bad := range []string{`{}`, `[1,"2"]`, `[1e39]`} {
		if err := res.AppendVector(gjson.Parse(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if err := res.AppendBase64Vector("AAAAPw=="); err != nil || res.Vectors[1][0] != 0.5 {
		t.Errorf("base64: %v %v", err, res.Vectors)
	}
	if err := res.AppendBase64Vector("AAA="); err == nil {
		t.Error("3 bytes accepted")
	}
}

func FuzzValidateEmbeddings(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":["a",[1]],"dimensions":3}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ValidateEmbeddings(body)
		if err != nil {
			return
		}
		res := EmbeddingsResult{}
		for range req.Inputs() {
			res.Vectors = append(res.Vectors, make([]float32, max(req.Dimensions, 1)))
		}
		if req.Dimensions == 0 {
			req.Dimensions = 1
		}
		if out, ok := EmbeddingsAnswer(nil, &req, &res); !ok || !gjson.ValidBytes(out) {
			t.Fatalf("%s", out)
		}
	})
}

// BenchmarkCanonicalBase64 checks one vector of 1,536 values as a provider
// sends it in base64.
func BenchmarkCanonicalBase64(b *testing.B) {
	raw := make([]byte, 0, 4*1536)
	for i := range 1536 {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(i)*0.00123))
	}
	s := base64.StdEncoding.AppendEncode(nil, raw)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if !canonicalBase64(s) {
			b.Fatal("refused")
		}
	}
}
