package providertest

import (
	"context"
	b64 "encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	cohere "github.com/cohere-ai/cohere-go/v2"
	"github.com/cohere-ai/cohere-go/v2/core"
	"github.com/tidwall/gjson"
)

// TestCohereEmbedSDK embeds through cohere-go's own client, as a Cohere
// user would: every type of vector the SDK reads is EmbeddingVector's (the
// floats and base64 exactly, the others derived from them), of the
// output_dimension asked for; meta bills the words; texts are echoed.
func TestCohereEmbedSDK(t *testing.T) {
	s := newFake(t)
	texts := []string{"the red fox", "ünïcødé \"quoted\"", "a blue whale swims far"}
	dims := 256
	res, err := coClient(s).V2.Embed(context.Background(), &cohere.V2EmbedRequest{
		Model: "embed-v4.0", InputType: cohere.EmbedInputTypeSearchQuery, Texts: texts, OutputDimension: &dims,
		EmbeddingTypes: []cohere.EmbeddingType{cohere.EmbeddingTypeFloat, cohere.EmbeddingTypeBase64, cohere.EmbeddingTypeInt8,
			cohere.EmbeddingTypeUint8, cohere.EmbeddingTypeBinary, cohere.EmbeddingTypeUbinary},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Embeddings
	if res.Id == "" || len(e.Float) != 3 || len(e.Base64) != 3 || len(e.Int8) != 3 || len(e.Uint8) != 3 || len(e.Binary) != 3 || len(e.Ubinary) != 3 {
		t.Fatalf("answer %+v", res)
	}
	for i, text := range texts {
		want := EmbeddingVector(text, dims)
		raw, _ := b64.StdEncoding.DecodeString(e.Base64[i])
		if len(e.Float[i]) != dims || len(raw) != 4*dims || len(e.Int8[i]) != dims || len(e.Binary[i]) != dims/8 {
			t.Fatalf("vector %d: %d floats, %d base64 bytes, %d int8, %d binary", i, len(e.Float[i]), len(raw), len(e.Int8[i]), len(e.Binary[i]))
		}
		for j, w := range want {
			if float32(e.Float[i][j]) != w || math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])) != w {
				t.Fatalf("vector %d value %d: %v and %v, want %v", i, j, e.Float[i][j], raw[4*j:4*j+4], w)
			}
			if q := int(math.Round(float64(w) * 127)); e.Int8[i][j] != q || e.Uint8[i][j] != q+128 {
				t.Fatalf("vector %d value %d: int8 %d uint8 %d, want %d", i, j, e.Int8[i][j], e.Uint8[i][j], q)
			}
			if bit := e.Ubinary[i][j/8] >> (7 - j%8) & 1; (bit == 1) != (w > 0) || e.Binary[i][j/8] != e.Ubinary[i][j/8]-128 {
				t.Fatalf("vector %d value %d: sign bit %d of %v", i, j, bit, w)
			}
		}
	}
	if strings.Join(res.Texts, "|") != strings.Join(texts, "|") || res.Meta == nil || res.Meta.BilledUnits == nil ||
		*res.Meta.BilledUnits.InputTokens != 10 || res.Meta.ApiVersion.Version != "2" {
		t.Errorf("texts %q, meta %+v", res.Texts, res.Meta)
	}

	// Without embedding_types and output_dimension: floats of EmbeddingDims.
	res, err = coClient(s).V2.Embed(context.Background(), &cohere.V2EmbedRequest{Model: "embed-english-v3.0", InputType: cohere.EmbedInputTypeClustering, Texts: []string{"x"}})
	if err != nil || len(res.Embeddings.Float) != 1 || len(res.Embeddings.Float[0]) != EmbeddingDims || res.Embeddings.Base64 != nil {
		t.Fatalf("defaults: %+v %v", res, err)
	}

	// A failure reaches the SDK as Cohere's error.
	_, err = coClient(s).V2.Embed(context.Background(), &cohere.V2EmbedRequest{Model: "embed-v4.0", InputType: "search", Texts: []string{"x"}})
	var apiErr *core.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Errorf("a wrong input_type: %v", err)
	}
}

// TestCohereEmbedInputs: images and mixed inputs are embedded (from their
// data URIs and texts) and billed as images.
func TestCohereEmbedInputs(t *testing.T) {
	s := newFake(t)
	const img = "data:image/png;base64,iVBORw0KGgo="
	res, body := post(t, s, cohereEmbedPath, `{"model":"embed-v4.0","input_type":"image","images":["`+img+`"]}`, oaAuth...)
	if res.StatusCode != 200 || !floatsEqual(gjson.Get(body, "embeddings.float.0"), EmbeddingVector(img, EmbeddingDims)) ||
		gjson.Get(body, "meta.billed_units").Raw != `{"images":1}` || gjson.Get(body, "texts").Exists() {
		t.Errorf("images: %d %s", res.StatusCode, body)
	}
	res, body = post(t, s, cohereEmbedPath, `{"model":"embed-v4.0","input_type":"search_document","inputs":[`+
		`{"content":[{"type":"text","text":"a red fox"},{"type":"image_url","image_url":{"url":"`+img+`"}}]},{"content":[{"type":"text","text":"b"}]}]}`, oaAuth...)
	if res.StatusCode != 200 || !floatsEqual(gjson.Get(body, "embeddings.float.0"), EmbeddingVector("a red fox "+img, EmbeddingDims)) ||
		!floatsEqual(gjson.Get(body, "embeddings.float.1"), EmbeddingVector("b", EmbeddingDims)) ||
		gjson.Get(body, "meta.billed_units").Raw != `{"images":1,"input_tokens":5}` {
		t.Errorf("inputs: %d %s", res.StatusCode, body)
	}
}

// floatsEqual reports whether a JSON array of numbers holds exactly want.
func floatsEqual(v gjson.Result, want []float32) bool {
	items := v.Array()
	if len(items) != len(want) {
		return false
	}
	for i, it := range items {
		f, err := strconv.ParseFloat(it.Raw, 32)
		if err != nil || float32(f) != want[i] {
			return false
		}
	}
	return true
}

// TestCohereEmbedRules: each rule of Cohere's embed API is a 400 in
// Cohere's shape.
func TestCohereEmbedRules(t *testing.T) {
	s := newFake(t)
	texts96 := strings.TrimSuffix(strings.Repeat(`"t",`, MaxCohereEmbedInputs+1), ",")
	const img = `"data:image/png;base64,AA=="`
	for name, body := range map[string]string{
		"not JSON":                        `texts=a`,
		"OpenAI's request":                `{"model":"embed-v4.0","input":["a"]}`,
		"OpenAI's dimensions":             `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"dimensions":256}`,
		"OpenAI's encoding_format":        `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"encoding_format":"float"}`,
		"no model":                        `{"input_type":"search_query","texts":["a"]}`,
		"no input_type":                   `{"model":"embed-v4.0","texts":["a"]}`,
		"Voyage's input_type":             `{"model":"embed-v4.0","input_type":"query","texts":["a"]}`,
		"no inputs":                       `{"model":"embed-v4.0","input_type":"search_query"}`,
		"texts and images":                `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"images":[` + img + `]}`,
		"texts a string":                  `{"model":"embed-v4.0","input_type":"search_query","texts":"a"}`,
		"empty texts":                     `{"model":"embed-v4.0","input_type":"search_query","texts":[]}`,
		"an empty text":                   `{"model":"embed-v4.0","input_type":"search_query","texts":["a",""]}`,
		"97 texts":                        `{"model":"embed-v4.0","input_type":"search_query","texts":[` + texts96 + `]}`,
		"token ids":                       `{"model":"embed-v4.0","input_type":"search_query","texts":[[1,2]]}`,
		"two images":                      `{"model":"embed-v4.0","input_type":"image","images":[` + img + `,` + img + `]}`,
		"an image URL":                    `{"model":"embed-v4.0","input_type":"image","images":["https://x/y.png"]}`,
		"an input of a string":            `{"model":"embed-v4.0","input_type":"search_query","inputs":["a"]}`,
		"an input item of chat's shape":   `{"model":"embed-v4.0","input_type":"search_query","inputs":[{"content":[{"type":"image_url","image_url":"` + "u" + `"}]}]}`,
		"output_dimension 768":            `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"output_dimension":768}`,
		"output_dimension on v3":          `{"model":"embed-english-v3.0","input_type":"search_query","texts":["a"],"output_dimension":256}`,
		"embedding_types unknown":         `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"embedding_types":["float32"]}`,
		"embedding_types empty":           `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"embedding_types":[]}`,
		"truncate lower case":             `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"truncate":"end"}`,
		"max_tokens 0":                    `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"max_tokens":0}`,
		"priority negative":               `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"priority":-1}`,
		"OpenAI's user":                   `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"user":"u"}`,
		"a v1 field":                      `{"model":"embed-v4.0","input_type":"search_query","texts":["a"],"response_type":"embeddings_floats"}`,
		"input of text item without text": `{"model":"embed-v4.0","input_type":"search_query","inputs":[{"content":[{"type":"text"}]}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			res, got := post(t, s, cohereEmbedPath, body, oaAuth...)
			if res.StatusCode != http.StatusBadRequest || !isCohereError(got) || !strings.HasPrefix(gjson.Get(got, "message").Str, "invalid request: ") {
				t.Errorf("%d %s, want a 400 in Cohere's shape", res.StatusCode, got)
			}
		})
	}
	wantAnswered(t, cohereEmbedPath, []namedBody{
		{"every optional field", `{"model":"embed-v4.0","input_type":"classification","texts":["a"],"max_tokens":8,"output_dimension":1536,` +
			`"embedding_types":["float","int8"],"truncate":"NONE","priority":0}`},
		{"96 texts", `{"model":"embed-v4.0","input_type":"search_document","texts":[` + strings.TrimSuffix(strings.Repeat(`"t",`, MaxCohereEmbedInputs), ",") + `]}`},
	})
}

// TestCohereEmbedKeys: the "cohere" key serves embed as it serves chat and
// rerank, and "cohere_embed" embed alone.
func TestCohereEmbedKeys(t *testing.T) {
	body := `{"model":"embed-v4.0","input_type":"search_query","texts":["a"]}`
	s := Start(t, Options{OpenAIKey: "oa", Keys: map[string]string{"cohere": "co"}})
	for key, want := range map[string]int{"co": 200, "oa": 401} {
		if res, got := post(t, s, cohereEmbedPath, body, "Authorization", "Bearer "+key); res.StatusCode != want {
			t.Errorf("key %s: %d %s, want %d", key, res.StatusCode, got, want)
		}
	}
	s = Start(t, Options{Keys: map[string]string{"cohere": "co", "cohere_embed": "emb"}})
	if res, got := post(t, s, cohereEmbedPath, body, "Authorization", "Bearer emb"); res.StatusCode != 200 {
		t.Errorf("%d %s", res.StatusCode, got)
	}
	if res, got := post(t, s, "/cohere/v1/embed", body, "Authorization", "Bearer emb"); res.StatusCode != 404 || !isCohereError(got) {
		t.Errorf("v1 embed: %d %s", res.StatusCode, got)
	}
}

// TestCohereRerankSDK reads the fake's Cohere rerank answer with
// cohere-go's v2 client: V2RerankResponse with nothing it does not know,
// and meta billing CohereSearchUnits — one unit for up to 100 documents,
// one more for each 100 after.
func TestCohereRerankSDK(t *testing.T) {
	s := newFake(t)
	for _, n := range []int{1, 100, 101, 250} {
		docs := make([]string, n)
		for i := range docs {
			docs[i] = "document " + strconv.Itoa(i) + " about a red fox"
		}
		topN, maxTokens, priority := 3, 512, 1
		res, err := coClient(s).V2.Rerank(context.Background(), &cohere.V2RerankRequest{Model: "rerank-v3.5", Query: "red fox", Documents: docs,
			TopN: &topN, MaxTokensPerDoc: &maxTokens, Priority: &priority})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != min(n, topN) || res.Id == nil || res.Meta == nil || res.Meta.BilledUnits == nil || res.Meta.BilledUnits.SearchUnits == nil {
			t.Fatalf("%d documents: %+v", n, res)
		}
		if got, want := *res.Meta.BilledUnits.SearchUnits, float64(CohereSearchUnits(n)); got != want || want != float64((n+99)/100) {
			t.Errorf("%d documents billed %v search units, want %v", n, got, want)
		}
		if extra := res.GetExtraProperties(); len(extra) > 0 {
			t.Errorf("fields cohere-go does not know: %v", extra)
		}
	}
}
