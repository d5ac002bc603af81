// Package embeddings translates unified embeddings requests for the
// providers whose embeddings API is OpenAI's shape, or close to it: OpenAI
// and the compatible servers (vLLM, Ollama, Infinity, TEI's /v1/embeddings,
// Together, DeepInfra, Fireworks), Mistral, Voyage and Jina. They differ in
// the name of a few fields — the dimensions, the input type — and in
// whether they take token ids, so one translator parameterised by a Format
// serves them all.
//
// Providers are asked for numbers (encoding_format float, which every one
// of them takes), or, when the client asked for base64 and the provider
// takes encoding_format base64 (Format.Base64), for base64: the host then
// copies the provider's vectors as they are once checked, and otherwise
// writes the client's encoding from the float32 values.
package embeddings

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Format describes one provider's OpenAI-shaped embeddings wire format.
type Format struct {
	// Name is the provider type, for error messages.
	Name string

	// Path is appended to the provider's base URL.
	Path string

	// DimensionsField carries dimensions: "dimensions" or
	// "output_dimension"; empty when the API has none (a request with
	// dimensions is refused).
	DimensionsField string

	// InputTypeField carries the input type: "input_type" (Voyage) or
	// "task" (Jina); empty when the API has none (input_type is dropped).
	InputTypeField string

	// InputTypes maps modelgate's "query" and "document" to the
	// provider's values; other values are sent as they are.
	InputTypes map[string]string

	// Tokens says whether the API takes token-id inputs.
	Tokens bool

	// SendsUser says whether the body may carry user.
	SendsUser bool

	// Base64 says whether the API takes encoding_format "base64" and
	// answers with each vector as the base64 of its little-endian float32
	// bytes, as OpenAI does.
	Base64 bool
}

// The formats of the supported providers.
var (
	OpenAI  = Format{Name: "openai", Path: "/embeddings", DimensionsField: "dimensions", Tokens: true, SendsUser: true, Base64: true}
	VLLM    = Format{Name: "vllm", Path: "/embeddings", DimensionsField: "dimensions", Tokens: true, SendsUser: true, Base64: true}
	Ollama  = Format{Name: "ollama", Path: "/embeddings", DimensionsField: "dimensions", Base64: true}
	TEI     = Format{Name: "tei", Path: "/v1/embeddings", Base64: true}
	Mistral = Format{Name: "mistral", Path: "/embeddings", DimensionsField: "output_dimension", Base64: true}
	Voyage  = Format{Name: "voyage", Path: "/embeddings", DimensionsField: "output_dimension", InputTypeField: "input_type",
		InputTypes: map[string]string{"query": "query", "document": "document"}, Base64: true}
	Jina = Format{Name: "jina", Path: "/embeddings", DimensionsField: "dimensions", InputTypeField: "task",
		InputTypes: map[string]string{"query": "retrieval.query", "document": "retrieval.passage"}}
	// Infinity, Together, DeepInfra and Fireworks take OpenAI's request
	// without token ids.
	Infinity = Format{Name: "infinity", Path: "/embeddings", DimensionsField: "dimensions"}
	Together = Format{Name: "together", Path: "/embeddings"}
)

// EmbeddingsRequests writes the provider's request: OpenAI's body with the
// provider's field names, asking for float numbers, or for base64 when the
// client did and the provider takes it.
func (f Format) EmbeddingsRequests(req *providers.EmbeddingsRequest, model string) ([]providers.Request, error) {
	if req.Tokens != nil && !f.Tokens {
		return nil, providers.Unsupported("input (token ids)", f.Name)
	}
	if req.Dimensions > 0 && f.DimensionsField == "" {
		return nil, providers.Unsupported("dimensions", f.Name)
	}
	w := jsonw.New(make([]byte, 0, 64+len(model)+inputSize(req)))
	o := w.Object()
	o.Str("model", model)
	WriteInput(o.Key("input"), req)
	if req.Base64 && f.Base64 {
		o.Str("encoding_format", "base64")
	} else {
		o.Str("encoding_format", "float")
	}
	if req.Dimensions > 0 {
		o.Int(f.DimensionsField, int64(req.Dimensions))
	}
	if req.InputType != "" && f.InputTypeField != "" {
		t := req.InputType
		if m, ok := f.InputTypes[t]; ok {
			t = m
		}
		o.Str(f.InputTypeField, t)
	}
	if req.User != "" && f.SendsUser {
		o.Str("user", req.User)
	}
	o.End()
	b, err := w.Finish()
	if err != nil {
		return nil, err
	}
	return []providers.Request{{Path: f.Path, Body: b}}, nil
}

// inputSize estimates the bytes the inputs take in JSON.
func inputSize(req *providers.EmbeddingsRequest) int {
	n := 0
	for _, t := range req.Texts {
		n += len(t) + 3
	}
	for _, t := range req.Tokens {
		n += 7*len(t) + 2
	}
	return n
}

// WriteInput writes the request's inputs as a JSON array: strings, or
// arrays of token ids.
func WriteInput(v jsonw.Value, req *providers.EmbeddingsRequest) {
	a := v.Array()
	if req.Tokens != nil {
		for _, ids := range req.Tokens {
			t := a.Array()
			for _, id := range ids {
				t.Int(id)
			}
			t.End()
		}
	} else {
		for _, t := range req.Texts {
			a.Str(t)
		}
	}
	a.End()
}

var errMalformed = errors.New("malformed embeddings answer")

// EmbeddingsResponse reads data[].embedding in index order (numbers, or
// base64 from a server that sends it regardless) and the usage:
// prompt_tokens, else total_tokens (Voyage and Jina report only that).
func (f Format) EmbeddingsResponse(_ int, _ http.Header, body []byte, res *providers.EmbeddingsResult) error {
	// An answer of many vectors is long: it is walked once, its strings
	// (base64 vectors) skipped many bytes at a time, rather than checked
	// and read with gjson path by path. Every value but the vectors is
	// checked as JSON; the vectors are checked by their parsers, which
	// take nothing but numbers or strict base64.
	var data, usage []byte
	valid := true
	if !providers.Members(body, func(k, v []byte) bool {
		switch {
		case string(k) == "data" && data == nil:
			data = v
			return true
		case string(k) == "usage" && usage == nil:
			usage = v
		}
		valid = providers.ValidJSON(v)
		return valid
	}) || !valid {
		return errMalformed
	}
	var items [][]byte
	if !providers.Elements(data, func(v []byte) bool { items = append(items, v); return true }) || len(items) == 0 {
		return errMalformed
	}
	start := res.Grow(len(items))
	one := providers.EmbeddingsResult{KeepBase64: res.KeepBase64}
	for pos, item := range items {
		i, indexed := pos, false
		var embedding []byte
		var err error
		if !providers.Members(item, func(k, v []byte) bool {
			if string(k) == "embedding" && embedding == nil {
				embedding = v
				return true
			}
			if string(k) == "index" && !indexed {
				i, indexed = int(gjson.ParseBytes(v).Int()), true
			}
			valid = providers.ValidJSON(v)
			return valid
		}) || !valid || i < 0 || i >= len(items) {
			return errMalformed
		}
		one.Vectors, one.Encoded = one.Vectors[:0], one.Encoded[:0]
		switch {
		case len(embedding) >= 2 && embedding[0] == '"' && bytes.IndexByte(embedding, '\\') < 0:
			err = one.AppendBase64Bytes(embedding[1 : len(embedding)-1])
		case len(embedding) > 0 && embedding[0] == '"':
			err = one.AppendBase64Vector(gjson.ParseBytes(embedding).Str)
		default:
			err = one.AppendVectorJSON(embedding)
		}
		if err != nil {
			return err
		}
		if !res.Place(start+i, &one) {
			return errMalformed
		}
	}
	u := gjson.ParseBytes(usage)
	t := u.Get("prompt_tokens")
	if !t.Exists() {
		t = u.Get("total_tokens")
	}
	if t.Type == gjson.Number {
		res.PromptTokens += t.Int()
		res.Counted = true
	}
	return nil
}

// Error maps an OpenAI-shaped error answer (and the variants compatible
// servers send: vLLM's integer codes, TEI's {message, code, type}).
func (f Format) Error(status int, _ http.Header, body []byte) *providers.Error {
	return providers.ErrorFromBody(status, body)
}

var _ providers.Embeddings = Format{}
