package providertest

import (
	"crypto/sha256"
	b64 "encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// embeddingsFormat is one provider's OpenAI-shaped embeddings API: OpenAI's
// own at /v1/embeddings, the others under a prefix of their own
// (/voyage/v1/embeddings, /tei/v1/embeddings, …). Bodies are checked as the
// providers check them: unknown fields, token ids where the provider takes
// none, and a dimensions field of another provider's name are 400s. Vectors
// are EmbeddingVector's.
type embeddingsFormat struct {
	modelInBody
	id        string // the format's name
	path      string // where it is served
	dims      string // the dimensions field: dimensions, output_dimension, or "" (none)
	inputType string // the input type field: input_type, task, or ""
	tokens    bool   // token-id inputs are taken
	usage     string // the usage key: prompt_tokens, or total_tokens alone
}

func (f *embeddingsFormat) name() string                     { return f.id }
func (f *embeddingsFormat) route(r *http.Request) routing    { return postTo(r, f.path) }
func (f *embeddingsFormat) headers(h http.Header, id string) { h.Set("X-Request-Id", "req_"+id) }
func (f *embeddingsFormat) authorized(r *http.Request, want string) bool {
	return keyOK(bearer(r), want)
}
func (f *embeddingsFormat) fail(w http.ResponseWriter, r *http.Request, fl fault) {
	openAIFormat{}.fail(w, r, fl)
}

// EmbeddingDims is the length of the fake's vectors when the request asks
// for no dimensions.
const EmbeddingDims = 64

// EmbeddingVector is the fake's embedding of text with dims values: unit
// length, derived from SHA-256 of the text, with values of every magnitude
// down to float32's subnormals, so that a gateway that loses bits on the
// way (float64 rounding, decimal printing, base64) shows it.
func EmbeddingVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	var sum float64
	for i := range v {
		h := sha256.Sum256([]byte(strconv.Itoa(i) + "\x00" + text))
		bits := binary.LittleEndian.Uint32(h[:])
		f := float64(bits&0xffffff)/float64(1<<24) - 0.5
		f *= math.Pow(2, -float64(h[4]%24)) // magnitudes from 0.5 down to 2^-25
		v[i] = float32(f)
		sum += float64(v[i]) * float64(v[i])
	}
	if sum > 0 {
		n := math.Sqrt(sum)
		for i := range v {
			v[i] = float32(float64(v[i]) / n)
		}
	}
	if dims > 3 {
		v[dims-1] = math.Float32frombits(1) // the smallest subnormal
	}
	return v
}

func (f *embeddingsFormat) serve(c *call) {
	root := gjson.ParseBytes(c.body)
	if !validJSON(c.body) || !root.IsObject() {
		openAIParamError(c.w, http.StatusBadRequest, "", "We could not parse the JSON body of your request.")
		return
	}
	dims := EmbeddingDims
	var inputs []string
	var bad, param string
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model", "user":
			if v.Type != gjson.String {
				bad, param = k.Str+" must be a string", k.Str
			}
		case "encoding_format":
			if v.Str != "float" && v.Str != "base64" {
				bad, param = "encoding_format must be float or base64", k.Str
			}
		case "input":
			inputs, bad = f.inputs(v)
			param = "input"
		case f.dims:
			if f.dims == "" || v.Type != gjson.Number || v.Int() < 1 || v.Int() > 4096 {
				bad, param = k.Str+" must be a positive integer", k.Str
			}
			dims = int(v.Int())
		case f.inputType:
			if f.inputType == "" || v.Type != gjson.String {
				bad, param = k.Str+" must be a string", k.Str
			}
		default:
			bad, param = "Unrecognized request argument supplied: "+k.Str, k.Str
		}
		return bad == ""
	})
	if bad == "" && inputs == nil {
		bad, param = "'input' is a required property", "input"
	}
	if bad == "" && f.id != "tei" && root.Get("model").Str == "" {
		bad, param = "'model' is a required property", "model"
	}
	if bad != "" {
		openAIParamError(c.w, http.StatusBadRequest, param, bad)
		return
	}
	if c.scripted() {
		return
	}
	base64 := root.Get("encoding_format").Str == "base64"
	b := make([]byte, 0, 64+len(inputs)*dims*12)
	b = append(b, `{"object":"list","data":[`...)
	tokens := 0
	for i, in := range inputs {
		tokens += c.s.promptTokens(in)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		vec := EmbeddingVector(in, dims)
		if base64 {
			raw := make([]byte, 0, 4*dims)
			for _, x := range vec {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
			}
			b = appendString(b, b64.StdEncoding.EncodeToString(raw))
		} else {
			b = append(b, '[')
			for j, x := range vec {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, root.Get("model").Str)
	b = append(b, `,"usage":{`...)
	if f.usage == "prompt_tokens" {
		b = append(b, `"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(tokens), 10)
		b = append(b, ',')
	}
	b = append(b, `"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, "}}"...)
	writeJSON(c.w, http.StatusOK, b)
}

// inputs reads input as the format takes it; token ids become "tok<id>"
// words, so their embedding is still derived from them.
func (f *embeddingsFormat) inputs(v gjson.Result) ([]string, string) {
	if v.Type == gjson.String {
		if v.Str == "" {
			return nil, "input must not be empty"
		}
		return []string{v.Str}, ""
	}
	items := v.Array()
	if !v.IsArray() || len(items) == 0 || len(items) > 2048 {
		return nil, "input must be a string or an array of 1 to 2048 items"
	}
	var out []string
	tokenList := func(t gjson.Result) (string, bool) {
		var words []string
		for _, id := range t.Array() {
			if id.Type != gjson.Number {
				return "", false
			}
			words = append(words, "tok"+id.Raw)
		}
		return strings.Join(words, " "), len(words) > 0
	}
	switch items[0].Type {
	case gjson.Number:
		if !f.tokens {
			return nil, "input must be a string or an array of strings"
		}
		s, ok := tokenList(v)
		if !ok {
			return nil, "invalid token ids"
		}
		return []string{s}, ""
	}
	for _, it := range items {
		switch {
		case it.Type == gjson.String && it.Str != "":
			out = append(out, it.Str)
		case it.IsArray() && f.tokens:
			s, ok := tokenList(it)
			if !ok {
				return nil, "invalid token ids"
			}
			out = append(out, s)
		default:
			return nil, "input must be a string or an array of strings"
		}
	}
	return out, ""
}
