package providertest

import (
	b64 "encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// cohereEmbedFormat is Cohere's Embed API v2, POST /v2/embed (the field names
// and values are cohere-go's V2EmbedRequest and EmbedByTypeResponse), served
// beside Cohere's chat and rerank at /cohere/v2/embed.
//
// A request holds exactly one of texts (1 to 96 strings), images (one data
// URI) or inputs (1 to 96 inputs of text and image_url content items),
// with input_type, which Cohere requires; output_dimension is 256, 512,
// 1024 or 1536 and refused for a model whose name says v3 (embed-v4 and
// newer take it). The answer has a vector per input, EmbeddingVector of
// the text (an image's URI, an input's items joined with spaces) with
// output_dimension values (EmbeddingDims without), in every type
// embedding_types asks for (float without it): float, base64 (the
// float32s' little-endian bytes), int8 and uint8 (each value scaled to
// the type's range), binary and ubinary (sign bits, eight a byte). meta
// bills the inputs' words as billed_units.input_tokens and the images as
// billed_units.images.
type cohereEmbedFormat struct{ modelInBody }

const cohereEmbedPath = "/cohere/v2/embed"

// MaxCohereEmbedInputs is the most texts or inputs one Cohere embed
// request may hold.
const MaxCohereEmbedInputs = 96

func (cohereEmbedFormat) name() string                     { return "cohere_embed" }
func (cohereEmbedFormat) route(r *http.Request) routing    { return postTo(r, cohereEmbedPath) }
func (cohereEmbedFormat) headers(h http.Header, id string) { h.Set("X-Debug-Trace-Id", "trace-"+id) }
func (cohereEmbedFormat) authorized(r *http.Request, want string) bool {
	return keyOK(bearer(r), want)
}
func (cohereEmbedFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	cohereChatFormat{}.fail(w, r, f)
}

// cohereEmbedTypes are the embedding types Cohere returns.
var cohereEmbedTypes = []string{"float", "int8", "uint8", "binary", "ubinary", "base64"}

// cohereInputTypes are Cohere's input types.
var cohereInputTypes = map[string]bool{"search_document": true, "search_query": true, "classification": true, "clustering": true, "image": true}

// checkCohereEmbed validates an embed request as strictly as Cohere and
// returns what to embed (one string per input), how many are images, the
// dimensions and the embedding types asked for, or what is wrong.
func checkCohereEmbed(body []byte) (inputs []string, images, dims int, types []string, msg string) {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return nil, 0, 0, nil, invalid("the request body must be a JSON object")
	}
	var model, inputType, texts, imgs, ins, maxTokens, outputDim, embTypes, truncate, priority gjson.Result
	bad := readFields(gjson.ParseBytes(body), []field{
		{"model", &model}, {"input_type", &inputType}, {"texts", &texts}, {"images", &imgs}, {"inputs", &ins},
		{"max_tokens", &maxTokens}, {"output_dimension", &outputDim}, {"embedding_types", &embTypes},
		{"truncate", &truncate}, {"priority", &priority},
	}, func(string) bool { return true })
	if bad != "" {
		return nil, 0, 0, nil, invalid("unknown field: parameter %s is not a valid field", bad)
	}
	if model.Type != gjson.String || model.Str == "" {
		return nil, 0, 0, nil, invalid("model is required")
	}
	if !inputType.Exists() {
		return nil, 0, 0, nil, invalid("input_type is required for embed-v3 and newer models")
	}
	if !cohereInputTypes[inputType.Str] {
		return nil, 0, 0, nil, invalid("input_type must be one of search_document, search_query, classification, clustering, image")
	}
	given := 0
	for _, v := range []gjson.Result{texts, imgs, ins} {
		if v.Exists() {
			given++
		}
	}
	if given != 1 {
		return nil, 0, 0, nil, invalid("exactly one of texts, images and inputs is required")
	}
	switch {
	case texts.Exists():
		items := texts.Array()
		if !texts.IsArray() || len(items) == 0 || len(items) > MaxCohereEmbedInputs {
			return nil, 0, 0, nil, invalid("texts must be a list of 1 to %d strings", MaxCohereEmbedInputs)
		}
		for i, t := range items {
			if t.Type != gjson.String || t.Str == "" {
				return nil, 0, 0, nil, invalid("texts[%d] must be a non-empty string", i)
			}
			inputs = append(inputs, t.Str)
		}
	case imgs.Exists():
		items := imgs.Array()
		if !imgs.IsArray() || len(items) != 1 {
			return nil, 0, 0, nil, invalid("images must be a list of one image")
		}
		if !isImageDataURI(items[0]) {
			return nil, 0, 0, nil, invalid("images[0] must be a data URI of a jpeg, png, webp or gif image")
		}
		inputs, images = []string{items[0].Str}, 1
	default:
		items := ins.Array()
		if !ins.IsArray() || len(items) == 0 || len(items) > MaxCohereEmbedInputs {
			return nil, 0, 0, nil, invalid("inputs must be a list of 1 to %d inputs", MaxCohereEmbedInputs)
		}
		for i, in := range items {
			parts := in.Get("content").Array()
			if !in.IsObject() || len(parts) == 0 || len(in.Map()) != 1 {
				return nil, 0, 0, nil, invalid("inputs[%d] must be an object with a non-empty content list", i)
			}
			var words []string
			for j, p := range parts {
				switch p.Get("type").Str {
				case "text":
					if t := p.Get("text"); t.Type == gjson.String && t.Str != "" && len(p.Map()) == 2 {
						words = append(words, t.Str)
						continue
					}
				case "image_url":
					if u := p.Get("image_url"); len(p.Map()) == 2 && len(u.Map()) == 1 && isImageDataURI(u.Get("url")) {
						words = append(words, u.Get("url").Str)
						images++
						continue
					}
				}
				return nil, 0, 0, nil, invalid("inputs[%d].content[%d] must be a text item {type, text} or an image_url item {type, image_url: {url}} with a data URI", i, j)
			}
			inputs = append(inputs, strings.Join(words, " "))
		}
	}
	if maxTokens.Exists() && (maxTokens.Type != gjson.Number || maxTokens.Num != math.Trunc(maxTokens.Num) || maxTokens.Num < 1) {
		return nil, 0, 0, nil, invalid("max_tokens must be a positive integer")
	}
	if truncate.Exists() && truncate.Str != "NONE" && truncate.Str != "START" && truncate.Str != "END" {
		return nil, 0, 0, nil, invalid("truncate must be one of NONE, START, END")
	}
	if priority.Exists() && (priority.Type != gjson.Number || priority.Num != math.Trunc(priority.Num) || priority.Num < 0) {
		return nil, 0, 0, nil, invalid("priority must be a non-negative integer")
	}
	dims = EmbeddingDims
	if outputDim.Exists() {
		switch outputDim.Raw {
		case "256", "512", "1024", "1536":
		default:
			return nil, 0, 0, nil, invalid("output_dimension must be one of 256, 512, 1024, 1536")
		}
		if strings.Contains(model.Str, "v3") {
			return nil, 0, 0, nil, invalid("output_dimension is only supported for embed-v4 and newer models")
		}
		dims = int(outputDim.Int())
	}
	types = []string{"float"}
	if embTypes.Exists() {
		items := embTypes.Array()
		if !embTypes.IsArray() || len(items) == 0 {
			return nil, 0, 0, nil, invalid("embedding_types must be a non-empty list")
		}
		types = types[:0]
		for _, it := range items {
			known := false
			for _, t := range cohereEmbedTypes {
				known = known || it.Str == t
			}
			if !known || it.Type != gjson.String {
				return nil, 0, 0, nil, invalid("embedding_types must hold float, int8, uint8, binary, ubinary or base64")
			}
			types = append(types, it.Str)
		}
	}
	return inputs, images, dims, types, ""
}

// isImageDataURI reports whether v is a base64 data URI of an image type
// Cohere embeds.
func isImageDataURI(v gjson.Result) bool {
	for _, t := range []string{"jpeg", "png", "webp", "gif"} {
		if strings.HasPrefix(v.Str, "data:image/"+t+";base64,") && len(v.Str) > len("data:image/"+t+";base64,") {
			return true
		}
	}
	return false
}

func (cohereEmbedFormat) serve(c *call) {
	inputs, images, dims, types, msg := checkCohereEmbed(c.body)
	if msg != "" {
		cohereError(c.w, http.StatusBadRequest, msg)
		return
	}
	if c.scripted() {
		return
	}
	vecs := make([][]float32, len(inputs))
	tokens := 0
	for i, in := range inputs {
		vecs[i] = EmbeddingVector(in, dims)
		if !strings.HasPrefix(in, "data:") {
			tokens += c.s.promptTokens(in)
		}
	}
	b := make([]byte, 0, 160+len(inputs)*dims*12*len(types))
	b = append(b, `{"id":"`...)
	b = append(b, cohereID(c.id)...)
	b = append(b, `","embeddings":{`...)
	seen := map[string]bool{}
	for _, t := range types {
		if seen[t] {
			continue
		}
		if len(seen) > 0 {
			b = append(b, ',')
		}
		seen[t] = true
		b = append(b, '"')
		b = append(b, t...)
		b = append(b, `":[`...)
		for i, v := range vecs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCohereEmbedding(b, t, v)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	if gjson.GetBytes(c.body, "texts").Exists() { // Cohere echoes the texts
		b = append(b, `,"texts":[`...)
		for i, in := range inputs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, in)
		}
		b = append(b, ']')
	}
	b = append(b, `,"meta":{"api_version":{"version":"2"},"billed_units":{`...)
	if images > 0 {
		b = append(b, `"images":`...)
		b = strconv.AppendInt(b, int64(images), 10)
		if tokens > 0 {
			b = append(b, ',')
		}
	}
	if tokens > 0 || images == 0 {
		b = append(b, `"input_tokens":`...)
		b = strconv.AppendInt(b, int64(tokens), 10)
	}
	b = append(b, "}}}"...)
	writeJSON(c.w, http.StatusOK, b)
}

// appendCohereEmbedding appends one vector as the embedding type t.
func appendCohereEmbedding(b []byte, t string, v []float32) []byte {
	switch t {
	case "base64":
		raw := make([]byte, 0, 4*len(v))
		for _, x := range v {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
		}
		return appendString(b, b64.StdEncoding.EncodeToString(raw))
	case "binary", "ubinary":
		b = append(b, '[')
		for i := 0; i < len(v); i += 8 {
			var bits int
			for j := i; j < i+8 && j < len(v); j++ {
				if v[j] > 0 {
					bits |= 1 << (7 - (j - i))
				}
			}
			if t == "binary" {
				bits -= 128
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(bits), 10)
		}
		return append(b, ']')
	}
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		switch t {
		case "int8":
			b = strconv.AppendInt(b, int64(math.Round(float64(x)*127)), 10)
		case "uint8":
			b = strconv.AppendInt(b, int64(math.Round(float64(x)*127))+128, 10)
		default:
			b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
		}
	}
	return append(b, ']')
}
