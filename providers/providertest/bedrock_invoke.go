package providertest

import (
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// bedrockEmbedder is the kind of embeddings model an InvokeModel request
// is for: its body's schema and its vectors' default length.
type bedrockEmbedder struct {
	titan bool   // Titan's {"inputText"}; else Cohere's {"texts"}
	v2    bool   // Titan Text Embeddings V2 (dimensions, normalize, embeddingTypes)
	v4    bool   // Cohere Embed v4 (output_dimension, max_tokens, inputs; truncate LEFT/RIGHT)
	name  string // for messages
	dims  int    // the default vector length
}

// bedrockEmbedderOf reads the model id (a model id, an inference profile
// id, or an ARN ending in one). An id that names no model (an application
// inference profile ARN, or the scripted names) is read from the body, as
// Bedrock knows which model stands behind it; ok is false for a model that
// is not an embeddings model the fake serves.
func bedrockEmbedderOf(model string, body gjson.Result) (e bedrockEmbedder, ok bool) {
	id := model
	if i := strings.LastIndexByte(id, '/'); strings.HasPrefix(id, "arn:") && i >= 0 {
		id = id[i+1:]
	}
	for _, geo := range []string{"us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca."} {
		id = strings.TrimPrefix(id, geo)
	}
	titanV2 := bedrockEmbedder{titan: true, v2: true, name: "Titan Text Embeddings V2", dims: 1024}
	cohereV4 := bedrockEmbedder{v4: true, name: "Cohere Embed v4", dims: 1536}
	switch {
	case strings.HasPrefix(id, "amazon.titan-embed-text-v2"):
		return titanV2, true
	case strings.HasPrefix(id, "amazon.titan-embed-text-v1"), strings.HasPrefix(id, "amazon.titan-embed-g1-text"):
		return bedrockEmbedder{titan: true, name: "Titan Embeddings G1 - Text", dims: 1536}, true
	case strings.HasPrefix(id, "cohere.embed-") && strings.Contains(id, "-v3"):
		return bedrockEmbedder{name: "Cohere Embed v3", dims: 1024}, true
	case strings.HasPrefix(id, "cohere.embed-"):
		return cohereV4, true
	}
	first, _, _ := strings.Cut(id, ".")
	switch first {
	case "amazon", "anthropic", "cohere", "meta", "mistral", "ai21", "deepseek", "openai", "qwen", "writer", "google", "twelvelabs", "stability":
		return e, false // a model the fake does not serve through InvokeModel
	}
	switch {
	case body.Get("inputText").Exists():
		return titanV2, true
	case body.Get("texts").Exists() || body.Get("input_type").Exists():
		return cohereV4, true
	}
	return e, false
}

// serveBedrockInvoke answers InvokeModel for the embeddings models, checking
// bodies as Bedrock checks them against the model's schema ("Malformed input
// request: …" ValidationExceptions for unknown or missing keys and values out
// of range):
//
//   - Titan Text Embeddings V2 {"inputText", "dimensions" (256, 512, 1024;
//     default 1024), "normalize", "embeddingTypes" (float, binary)} and G1
//     {"inputText"} (1536 values), answered with {"embedding",
//     "inputTextTokenCount"} (V2: and "embeddingsByType");
//   - Cohere Embed v3 and v4 {"texts" (1 to 96), "input_type" (required),
//     "truncate", "embedding_types", "images"; v4 also "output_dimension"
//     (256, 512, 1024, 1536; default 1536), "max_tokens", "inputs"},
//     answered with {"id", "embeddings", "response_type", "texts"}: the
//     vectors by type (embeddings_by_type) when embedding_types is given,
//     else the list of floats (embeddings_floats); v3 vectors have 1024
//     values.
//
// Every answer carries the input's word count in
// X-Amzn-Bedrock-Input-Token-Count. Vectors are EmbeddingVector's, as
// float32 values; int8 and uint8 are the floats scaled to 127, binary and
// ubinary their sign bits packed eight to a byte.
func serveBedrockInvoke(c *call) {
	root := gjson.ParseBytes(c.body)
	if !validJSON(c.body) || !root.IsObject() {
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	}
	e, ok := bedrockEmbedderOf(c.model, root)
	if !ok {
		bedrockError(c.w, http.StatusBadRequest, "ValidationException",
			"The provided model identifier is invalid. (The fake serves InvokeModel for Titan and Cohere embeddings models only.)")
		return
	}
	var texts []string
	var msg string
	if e.titan {
		texts, msg = checkBedrockTitan(e, root)
	} else {
		texts, msg = checkBedrockCohere(e, root)
	}
	if msg != "" {
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", "Malformed input request: "+msg+", please reformat your input and try again.")
		return
	}
	if c.scripted() {
		return
	}

	tokens := 0
	for _, t := range texts {
		tokens += c.s.promptTokens(t)
	}
	c.w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(tokens))
	c.w.Header().Set("X-Amzn-Bedrock-Invocation-Latency", "42")
	dims := e.dims
	b := make([]byte, 0, 256+len(texts)*dims*12)
	if e.titan {
		if d := root.Get("dimensions"); d.Exists() {
			dims = int(d.Int())
		}
		vec := EmbeddingVector(texts[0], dims)
		b = append(b, `{"embedding":`...)
		b = bedrockAppendFloats(b, vec)
		if e.v2 {
			types := root.Get("embeddingTypes")
			if !types.Exists() {
				types = gjson.Parse(`["float"]`)
			}
			b = append(b, `,"embeddingsByType":{`...)
			for i, t := range types.Array() {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendString(b, t.Str)
				b = append(b, ':')
				b = bedrockAppendEmbeddingAs(b, t.Str, vec)
			}
			b = append(b, '}')
		}
		b = append(b, `,"inputTextTokenCount":`...)
		b = strconv.AppendInt(b, int64(tokens), 10)
		writeJSON(c.w, http.StatusOK, append(b, '}'))
		return
	}

	if d := root.Get("output_dimension"); d.Exists() {
		dims = int(d.Int())
	}
	vecs := make([][]float32, len(texts))
	for i, t := range texts {
		vecs[i] = EmbeddingVector(t, dims)
	}
	b = append(b, `{"id":"f00dcafe-e3b0-4000-8000-`...)
	b = append(b, strings.Repeat("0", max(0, 12-len(c.id)))...)
	b = append(b, c.id...)
	b = append(b, `","embeddings":`...)
	if types := root.Get("embedding_types"); types.Exists() {
		b = append(b, '{')
		for i, t := range types.Array() {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t.Str)
			b = append(b, `:[`...)
			for j, v := range vecs {
				if j > 0 {
					b = append(b, ',')
				}
				b = bedrockAppendEmbeddingAs(b, t.Str, v)
			}
			b = append(b, ']')
		}
		b = append(b, `},"response_type":"embeddings_by_type"`...)
	} else {
		b = append(b, '[')
		for j, v := range vecs {
			if j > 0 {
				b = append(b, ',')
			}
			b = bedrockAppendFloats(b, v)
		}
		b = append(b, `],"response_type":"embeddings_floats"`...)
	}
	b = append(b, `,"texts":[`...)
	for i, t := range texts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, t)
	}
	writeJSON(c.w, http.StatusOK, append(b, "]}"...))
}

// checkBedrockTitan checks a Titan embeddings body and returns its one text.
func checkBedrockTitan(e bedrockEmbedder, root gjson.Result) ([]string, string) {
	var msg string
	root.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "inputText":
			if v.Type != gjson.String || v.Str == "" || len(v.Str) > 50000 {
				msg = "#/inputText: expected a string of 1 to 50000 characters"
			}
		case k.Str == "dimensions" && e.v2:
			if v.Type != gjson.Number || !bedrockOneOfInts(v.Num, 256, 512, 1024) {
				msg = "#/dimensions: " + v.Raw + " is not a valid enum value"
			}
		case k.Str == "normalize" && e.v2:
			if v.Type != gjson.True && v.Type != gjson.False {
				msg = "#/normalize: expected type: Boolean, found: " + bedrockJSONTypeName(v)
			}
		case k.Str == "embeddingTypes" && e.v2:
			if !v.IsArray() || len(v.Array()) == 0 {
				msg = "#/embeddingTypes: expected a non-empty array"
			}
			for _, t := range v.Array() {
				if t.Str != "float" && t.Str != "binary" {
					msg = "#/embeddingTypes: " + t.Raw + " is not a valid enum value"
				}
			}
		default:
			msg = "#: extraneous key [" + k.Str + "] is not permitted"
		}
		return msg == ""
	})
	if msg != "" {
		return nil, msg
	}
	t := root.Get("inputText")
	if !t.Exists() {
		return nil, "#: required key [inputText] not found"
	}
	return []string{t.Str}, ""
}

// checkBedrockCohere checks a Cohere Embed body on Bedrock and returns its
// texts.
func checkBedrockCohere(e bedrockEmbedder, root gjson.Result) ([]string, string) {
	var msg string
	var texts []string
	inputs := 0
	root.ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "texts":
			items := v.Array()
			if !v.IsArray() || len(items) > 96 {
				msg = "#/texts: expected an array of at most 96 strings"
			}
			for _, t := range items {
				if t.Type != gjson.String || !e.v4 && len(t.Str) > 2048 {
					msg = "#/texts: expected strings of at most 2048 characters"
				}
				texts = append(texts, t.Str)
			}
			inputs++
		case k.Str == "input_type":
			allowed := []string{"search_document", "search_query", "classification", "clustering"}
			if !e.v4 {
				allowed = append(allowed, "image")
			}
			if !bedrockOneOfStrings(v.Str, allowed...) || v.Type != gjson.String {
				msg = "#/input_type: " + v.Raw + " is not a valid enum value"
			}
		case k.Str == "truncate":
			allowed := []string{"NONE", "START", "END"}
			if e.v4 {
				allowed = []string{"NONE", "LEFT", "RIGHT"}
			}
			if !bedrockOneOfStrings(v.Str, allowed...) || v.Type != gjson.String {
				msg = "#/truncate: " + v.Raw + " is not a valid enum value"
			}
		case k.Str == "embedding_types":
			if !v.IsArray() || len(v.Array()) == 0 {
				msg = "#/embedding_types: expected a non-empty array"
			}
			for _, t := range v.Array() {
				if !bedrockOneOfStrings(t.Str, "float", "int8", "uint8", "binary", "ubinary") || t.Type != gjson.String {
					msg = "#/embedding_types: " + t.Raw + " is not a valid enum value"
				}
			}
		case k.Str == "output_dimension" && e.v4:
			if v.Type != gjson.Number || !bedrockOneOfInts(v.Num, 256, 512, 1024, 1536) {
				msg = "#/output_dimension: " + v.Raw + " is not a valid enum value"
			}
		case k.Str == "max_tokens" && e.v4:
			if v.Type != gjson.Number || v.Num < 1 || v.Num != math.Trunc(v.Num) {
				msg = "#/max_tokens: expected a positive integer"
			}
		case k.Str == "images", k.Str == "inputs" && e.v4:
			// Images are beyond what the fake embeds.
			msg = "#/" + k.Str + ": the fake embeds texts only"
		default:
			msg = "#: extraneous key [" + k.Str + "] is not permitted"
		}
		return msg == ""
	})
	switch {
	case msg != "":
		return nil, msg
	case !root.Get("input_type").Exists():
		return nil, "#: required key [input_type] not found"
	case inputs == 0:
		return nil, "#: required key [texts] not found"
	case len(texts) == 0:
		return nil, "#/texts: expected at least 1 item"
	}
	return texts, ""
}

func bedrockOneOfInts(n float64, set ...float64) bool {
	for _, v := range set {
		if n == v {
			return true
		}
	}
	return false
}

func bedrockOneOfStrings(s string, set ...string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// bedrockJSONTypeName names a JSON value's type as AWS's schema errors do.
func bedrockJSONTypeName(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return "String"
	case gjson.Number:
		return "Integer"
	case gjson.Null:
		return "Null"
	}
	if v.IsArray() {
		return "JSONArray"
	}
	return "JSONObject"
}

// bedrockAppendFloats appends a vector as JSON numbers, each the shortest decimal
// of its float32.
func bedrockAppendFloats(b []byte, vec []float32) []byte {
	b = append(b, '[')
	for i, x := range vec {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

// bedrockAppendEmbeddingAs appends a vector in one of the embedding types: float,
// int8 and uint8 (the values scaled to 127, uint8 shifted by 128), binary
// and ubinary (sign bits packed eight to a byte, binary as signed bytes).
func bedrockAppendEmbeddingAs(b []byte, typ string, vec []float32) []byte {
	if typ == "float" {
		return bedrockAppendFloats(b, vec)
	}
	b = append(b, '[')
	switch typ {
	case "int8", "uint8":
		for i, x := range vec {
			if i > 0 {
				b = append(b, ',')
			}
			q := int64(math.Round(math.Max(-1, math.Min(1, float64(x))) * 127))
			if typ == "uint8" {
				q += 128
			}
			b = strconv.AppendInt(b, q, 10)
		}
	default: // binary, ubinary
		for i := 0; i < len(vec); i += 8 {
			var bits byte
			for j := i; j < i+8 && j < len(vec); j++ {
				bits <<= 1
				if vec[j] > 0 {
					bits |= 1
				}
			}
			if i > 0 {
				b = append(b, ',')
			}
			if typ == "binary" {
				b = strconv.AppendInt(b, int64(int8(bits)), 10)
			} else {
				b = strconv.AppendInt(b, int64(bits), 10)
			}
		}
	}
	return append(b, ']')
}
