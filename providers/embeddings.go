package providers

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// EmbeddingsRequest is a checked unified embeddings request (OpenAI's
// POST /v1/embeddings, WIRE_FORMATS.md §F.1):
//
//	{"model": "…", "input": "…" | ["…", …] | [1, 2, …] | [[1, 2], …],
//	 "dimensions": 256, "encoding_format": "float" | "base64", "user": "…",
//	 "input_type": "query" | "document" | …}
//
// Exactly one of Texts and Tokens holds the inputs, in order.
type EmbeddingsRequest struct {
	Model string

	// Texts are the inputs when they are strings.
	Texts []string
	// Tokens are the inputs when they are token ids.
	Tokens [][]int64

	// Dimensions is the vector length asked for; 0: the model's own.
	Dimensions int

	// Base64 is true when the client asked for encoding_format base64:
	// the answer then carries each vector as the base64 of its
	// little-endian float32 bytes. Providers are always asked for numbers.
	Base64 bool

	// User is the client's end-user id, passed on where a provider takes
	// one.
	User string

	// InputType is modelgate's extension for the providers that embed
	// queries and documents differently (Cohere's input_type, Voyage's
	// input_type, Gemini's taskType, Jina's task): "query", "document"
	// or a provider's own value, passed as it is. Empty: the provider's
	// default (Cohere, which requires one: search_document).
	InputType string
}

// Inputs is how many inputs the request holds.
func (r *EmbeddingsRequest) Inputs() int {
	if r.Tokens != nil {
		return len(r.Tokens)
	}
	return len(r.Texts)
}

// MaxEmbeddingInputs is the most inputs one request may hold, OpenAI's
// limit.
const MaxEmbeddingInputs = 2048

// ValidateEmbeddings checks a unified embeddings request. Errors are 400
// invalid_request_error naming the field, as OpenAI's are.
func ValidateEmbeddings(body []byte) (EmbeddingsRequest, error) {
	var req EmbeddingsRequest
	if tooDeep(body, MaxDepth) || !gjson.ValidBytes(body) {
		return req, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json", Message: "the request body is not valid JSON"}
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return req, &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_json", Message: "the request body must be a JSON object"}
	}
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			if v.Type != gjson.String || v.Str == "" {
				err = InvalidParam("model", "model must be a non-empty string")
			}
			req.Model = v.Str
		case "input":
			err = readInput(&req, v)
		case "dimensions":
			if v.Type != gjson.Null {
				if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) || v.Num < 1 || v.Num > 1<<16 {
					err = InvalidParam("dimensions", "dimensions must be a positive integer")
				}
				req.Dimensions = int(v.Int())
			}
		case "encoding_format":
			switch {
			case v.Type == gjson.Null || v.Str == "float":
			case v.Str == "base64":
				req.Base64 = true
			default:
				err = InvalidParam("encoding_format", "encoding_format must be float or base64")
			}
		case "user", "input_type":
			if v.Type != gjson.String && v.Type != gjson.Null {
				err = InvalidParam(k.Str, "%s must be a string", k.Str)
			}
			if k.Str == "user" {
				req.User = v.Str
			} else {
				req.InputType = v.Str
			}
		}
		return err == nil
	})
	if err != nil {
		return req, err
	}
	if req.Model == "" {
		return req, InvalidParam("model", "you must provide a model parameter")
	}
	if req.Texts == nil && req.Tokens == nil {
		return req, InvalidParam("input", "input is required")
	}
	return req, nil
}

// readInput reads input: a string, strings, token ids, or arrays of them.
func readInput(req *EmbeddingsRequest, v gjson.Result) error {
	bad := func() error {
		return InvalidParam("input", "input must be a non-empty string, an array of them, an array of token ids, or an array of such arrays")
	}
	switch {
	case v.Type == gjson.String:
		if v.Str == "" {
			return bad()
		}
		req.Texts = []string{v.Str}
		return nil
	case !v.IsArray():
		return bad()
	}
	items := v.Array()
	if len(items) == 0 || len(items) > MaxEmbeddingInputs {
		return InvalidParam("input", "input must hold 1 to %d items", MaxEmbeddingInputs)
	}
	switch items[0].Type {
	case gjson.String:
		req.Texts = make([]string, len(items))
		for i, it := range items {
			if it.Type != gjson.String || it.Str == "" {
				return InvalidParam("input["+strconv.Itoa(i)+"]", "every input must be a non-empty string")
			}
			req.Texts[i] = it.Str
		}
	case gjson.Number:
		ids, ok := tokenIDs(v)
		if !ok {
			return bad()
		}
		req.Tokens = [][]int64{ids}
	default:
		req.Tokens = make([][]int64, len(items))
		for i, it := range items {
			ids, ok := tokenIDs(it)
			if !ok {
				return InvalidParam("input["+strconv.Itoa(i)+"]", "every input must be a non-empty array of token ids")
			}
			req.Tokens[i] = ids
		}
	}
	return nil
}

func tokenIDs(v gjson.Result) ([]int64, bool) {
	if !v.IsArray() {
		return nil, false
	}
	items := v.Array()
	ids := make([]int64, len(items))
	for i, it := range items {
		if it.Type != gjson.Number || it.Num != math.Trunc(it.Num) || it.Num < 0 || it.Num > math.MaxInt32 {
			return nil, false
		}
		ids[i] = int64(it.Num)
	}
	return ids, len(ids) > 0
}

// Embeddings translates embeddings for one provider wire format.
// Implementations are safe for concurrent use.
type Embeddings interface {
	// EmbeddingsRequests writes the provider's requests for req, with
	// model the provider's own name of the model: usually one; a provider
	// that embeds one input per call (Bedrock's Titan) gets one per
	// input. A request the provider cannot serve is an *Error with a 4xx
	// status (token-id inputs to a provider that takes only text, say).
	EmbeddingsRequests(req *EmbeddingsRequest, model string) ([]Request, error)

	// EmbeddingsResponse reads the successful answer to the i-th request,
	// with its headers (some providers report usage there), appending its
	// vectors to res in input order and adding its token count.
	EmbeddingsResponse(i int, header http.Header, body []byte, res *EmbeddingsResult) error

	// Error maps a provider's failed answer into the unified error.
	Error(status int, header http.Header, body []byte) *Error
}

// EmbeddingsResult collects a provider's answers to one request.
type EmbeddingsResult struct {
	// Vectors hold one vector per input, in input order.
	Vectors [][]float32
	// PromptTokens is the tokens the provider counted; Counted says
	// whether it reported any (Gemini reports none: the answer then
	// carries the request's EstimateTokens, so it is accounted and priced
	// rather than free).
	PromptTokens int64
	Counted      bool
}

var errBadVector = errors.New("a vector holds something other than numbers")

// AppendVector reads v, a JSON array of numbers, as float32 values onto
// res.Vectors. A provider's decimal numbers convert to the float32 it
// computed: the nearest float32 to a decimal printed from a float32 is
// that float32.
func (res *EmbeddingsResult) AppendVector(v gjson.Result) error {
	if !v.IsArray() {
		return errBadVector
	}
	vec := make([]float32, 0, 1024)
	var err error
	v.ForEach(func(_, x gjson.Result) bool {
		if x.Type != gjson.Number {
			err = errBadVector
			return false
		}
		f, perr := strconv.ParseFloat(x.Raw, 32)
		if perr != nil {
			err = errBadVector
			return false
		}
		vec = append(vec, float32(f))
		return true
	})
	if err != nil {
		return err
	}
	res.Vectors = append(res.Vectors, vec)
	return nil
}

// AppendBase64Vector reads a base64 string of little-endian float32 bytes
// onto res.Vectors.
func (res *EmbeddingsResult) AppendBase64Vector(s string) error {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		return errBadVector
	}
	vec := make([]float32, len(b)/4)
	for i := range vec {
		vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	res.Vectors = append(res.Vectors, vec)
	return nil
}

// EmbeddingsAnswer writes the unified answer for req from res: OpenAI's
// list of embeddings, each vector as numbers or, when req.Base64, as the
// base64 of its little-endian float32 bytes; model is the model as the
// client named it. ok is false when the provider's answer does not fit the
// request (another number of vectors, or vectors longer than the
// dimensions asked for).
func EmbeddingsAnswer(dst []byte, req *EmbeddingsRequest, res *EmbeddingsResult) (out []byte, ok bool) {
	if len(res.Vectors) != req.Inputs() {
		return dst, false
	}
	dst = append(dst, `{"object":"list","data":[`...)
	var raw []byte
	for i, vec := range res.Vectors {
		if req.Dimensions > 0 && len(vec) != req.Dimensions {
			return dst, false
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		if req.Base64 {
			raw = raw[:0]
			for _, f := range vec {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, raw)
			dst = append(dst, '"')
		} else {
			dst = append(dst, '[')
			for j, f := range vec {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendFloat(dst, float64(f), 'g', -1, 32)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"model":`...)
	dst = AppendString(dst, req.Model)
	tokens := res.PromptTokens
	if !res.Counted {
		tokens = req.EstimateTokens()
	}
	dst = append(dst, `,"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, tokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, tokens, 10)
	return append(dst, "}}"...), true
}
