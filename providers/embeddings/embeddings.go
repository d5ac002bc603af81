// Package embeddings translates unified embeddings requests for the
// providers whose embeddings API is OpenAI's shape, or close to it: OpenAI
// and the compatible servers (vLLM, Ollama, Infinity, TEI's /v1/embeddings,
// Together, DeepInfra, Fireworks), Mistral, Voyage and Jina. They differ in
// the name of a few fields — the dimensions, the input type — and in
// whether they take token ids, so one translator parameterised by a Format
// serves them all (WIRE_FORMATS.md §F.2).
//
// Providers are always asked for numbers (encoding_format float, which
// every one of them takes); the host writes the client's encoding, base64
// included, from the float32 values.
package embeddings

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
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
}

// The formats of the supported providers.
var (
	OpenAI  = Format{Name: "openai", Path: "/embeddings", DimensionsField: "dimensions", Tokens: true, SendsUser: true}
	VLLM    = Format{Name: "vllm", Path: "/embeddings", DimensionsField: "dimensions", Tokens: true, SendsUser: true}
	Ollama  = Format{Name: "ollama", Path: "/embeddings", DimensionsField: "dimensions"}
	TEI     = Format{Name: "tei", Path: "/v1/embeddings"}
	Mistral = Format{Name: "mistral", Path: "/embeddings", DimensionsField: "output_dimension"}
	Voyage  = Format{Name: "voyage", Path: "/embeddings", DimensionsField: "output_dimension", InputTypeField: "input_type",
		InputTypes: map[string]string{"query": "query", "document": "document"}}
	Jina = Format{Name: "jina", Path: "/embeddings", DimensionsField: "dimensions", InputTypeField: "task",
		InputTypes: map[string]string{"query": "retrieval.query", "document": "retrieval.passage"}}
	// Infinity, Together, DeepInfra and Fireworks take OpenAI's request
	// without token ids.
	Infinity = Format{Name: "infinity", Path: "/embeddings", DimensionsField: "dimensions"}
	Together = Format{Name: "together", Path: "/embeddings"}
)

// EmbeddingsRequests writes the provider's request: OpenAI's body with the
// provider's field names, asking for float numbers.
func (f Format) EmbeddingsRequests(req *providers.EmbeddingsRequest, model string) ([]providers.Request, error) {
	if req.Tokens != nil && !f.Tokens {
		return nil, providers.Unsupported("input (token ids)", f.Name)
	}
	if req.Dimensions > 0 && f.DimensionsField == "" {
		return nil, providers.Unsupported("dimensions", f.Name)
	}
	b := make([]byte, 0, 64+len(model)+inputSize(req))
	b = append(b, `{"model":`...)
	b = providers.AppendString(b, model)
	b = append(b, `,"input":`...)
	b = AppendInput(b, req)
	b = append(b, `,"encoding_format":"float"`...)
	if req.Dimensions > 0 {
		b = append(b, ',', '"')
		b = append(b, f.DimensionsField...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, int64(req.Dimensions), 10)
	}
	if req.InputType != "" && f.InputTypeField != "" {
		t := req.InputType
		if m, ok := f.InputTypes[t]; ok {
			t = m
		}
		b = append(b, ',', '"')
		b = append(b, f.InputTypeField...)
		b = append(b, '"', ':')
		b = providers.AppendString(b, t)
	}
	if req.User != "" && f.SendsUser {
		b = append(b, `,"user":`...)
		b = providers.AppendString(b, req.User)
	}
	b = append(b, '}')
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

// AppendInput writes the request's inputs as a JSON array: strings, or
// arrays of token ids.
func AppendInput(b []byte, req *providers.EmbeddingsRequest) []byte {
	b = append(b, '[')
	if req.Tokens != nil {
		for i, ids := range req.Tokens {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for j, id := range ids {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, id, 10)
			}
			b = append(b, ']')
		}
	} else {
		for i, t := range req.Texts {
			if i > 0 {
				b = append(b, ',')
			}
			b = providers.AppendString(b, t)
		}
	}
	return append(b, ']')
}

var errMalformed = errors.New("malformed embeddings answer")

// EmbeddingsResponse reads data[].embedding in index order (numbers, or
// base64 from a server that sends it regardless) and the usage:
// prompt_tokens, else total_tokens (Voyage and Jina report only that).
func (f Format) EmbeddingsResponse(_ int, _ http.Header, body []byte, res *providers.EmbeddingsResult) error {
	if !providers.ValidJSON(body) {
		return errMalformed
	}
	root := gjson.ParseBytes(body)
	data := root.Get("data").Array()
	if len(data) == 0 {
		return errMalformed
	}
	start := len(res.Vectors)
	res.Vectors = append(res.Vectors, make([][]float32, len(data))...)
	for pos, d := range data {
		i := pos
		if idx := d.Get("index"); idx.Exists() {
			i = int(idx.Int())
		}
		if i < 0 || i >= len(data) || res.Vectors[start+i] != nil {
			return errMalformed
		}
		var one providers.EmbeddingsResult
		var err error
		if e := d.Get("embedding"); e.Type == gjson.String {
			err = one.AppendBase64Vector(e.Str)
		} else {
			err = one.AppendVector(e)
		}
		if err != nil {
			return err
		}
		res.Vectors[start+i] = one.Vectors[0]
	}
	u := root.Get("usage")
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
