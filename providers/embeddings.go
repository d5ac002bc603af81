package providers

import (
	"github.com/modelgate/modelgate/providers/jsonw"

	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"
)

// EmbeddingsRequest is a checked unified embeddings request (OpenAI's
// POST /v1/embeddings):
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
	// little-endian float32 bytes. Providers are asked for numbers, or for
	// base64 where they take it (whatever they send, the answer holds
	// the exact float32 values).
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
	// with its headers (some providers report usage there; the gateway
	// has taken out the rate-limit headers, x-ratelimit-* and
	// anthropic-ratelimit-*), appending its vectors to res in input order
	// and adding its token count.
	EmbeddingsResponse(i int, header http.Header, body []byte, res *EmbeddingsResult) error

	// Error maps a provider's failed answer into the unified error.
	Error(status int, header http.Header, body []byte) *Error
}

// EmbeddingsResult collects a provider's answers to one request.
type EmbeddingsResult struct {
	// Vectors hold one vector per input, in input order; nil where
	// Encoded holds the vector.
	Vectors [][]float32
	// Encoded, when not nil, runs beside Vectors: a non-empty Encoded[i]
	// is vector i as the provider sent it, the standard base64 of its
	// little-endian float32 bytes, checked and kept as text because the
	// answer is base64 too (KeepBase64). It may be a slice of the
	// provider's answer, which must then outlive the result.
	Encoded [][]byte
	// KeepBase64 is set by the host when the client asked for base64:
	// AppendBase64Vector then keeps a provider's base64 as it is, rather
	// than decoding it to encode it again, when it is exactly what the
	// answer would carry.
	KeepBase64 bool
	// PromptTokens is the tokens the provider counted; Counted says
	// whether it reported any (Gemini reports none: the answer then
	// carries the request's EstimateTokens, so it is accounted and priced
	// rather than free).
	PromptTokens int64
	Counted      bool

	scratch []byte // base64 decoding, reused
}

var errBadVector = errors.New("a vector holds something other than numbers")

// tokens is the input tokens the answer to req reports: the provider's
// count, or the request's estimate where the provider gave none.
func (res *EmbeddingsResult) tokens(req *EmbeddingsRequest) int64 {
	if !res.Counted {
		return req.EstimateTokens()
	}
	return res.PromptTokens
}

// Used is what the embeddings of req used, as data: the input tokens the
// answer's usage reports (EmbeddingsAnswer).
func (res *EmbeddingsResult) Used(req *EmbeddingsRequest) Used {
	return Used{Known: true, Embedding: res.tokens(req)}
}

// AppendVector reads v, a JSON array of numbers, as float32 values onto
// res.Vectors. A provider's decimal numbers convert to the float32 it
// computed: the nearest float32 to a decimal printed from a float32 is
// that float32 (ParseFloat32).
func (res *EmbeddingsResult) AppendVector(v gjson.Result) error {
	if !v.IsArray() {
		return errBadVector
	}
	// One value per comma and one more: the vector's exact length, for
	// one allocation (a comma inside anything but numbers fails below).
	return appendVector(res, v.Raw)
}

// AppendVectorJSON reads raw, a JSON array of numbers, as AppendVector
// does.
func (res *EmbeddingsResult) AppendVectorJSON(raw []byte) error { return appendVector(res, raw) }

func appendVector[T text](res *EmbeddingsResult, raw T) error {
	// One value per comma and one more: the vector's exact length, for
	// one allocation (a comma inside anything but numbers fails below).
	n := 1
	for i := range len(raw) {
		if raw[i] == ',' {
			n++
		}
	}
	vec, ok := AppendFloat32s(make([]float32, 0, n), raw)
	if !ok {
		return errBadVector
	}
	res.add(vec, nil)
	return nil
}

// AppendBase64Vector reads a base64 string of little-endian float32 bytes
// onto res.Vectors, or, when res.KeepBase64 and s is the canonical
// standard base64 of whole float32s (what EmbeddingsAnswer would write of
// them), onto res.Encoded as it is.
func (res *EmbeddingsResult) AppendBase64Vector(s string) error {
	// s is only read, and kept only as it is: no copy of the text.
	return res.AppendBase64Bytes(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// AppendBase64Bytes is AppendBase64Vector of s's bytes, which res.Encoded
// keeps (without copying them) when it keeps the vector as it is.
func (res *EmbeddingsResult) AppendBase64Bytes(s []byte) error {
	if res.KeepBase64 && canonicalBase64(s) {
		res.add(nil, s)
		return nil
	}
	// Anything else base64 decodes to (line breaks, bits beyond the
	// data) is read as its values, which the answer encodes anew.
	n := base64.StdEncoding.DecodedLen(len(s))
	if cap(res.scratch) < n {
		res.scratch = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(res.scratch[:n], s)
	if err != nil || n%4 != 0 {
		return errBadVector
	}
	b := res.scratch[:n]
	vec := make([]float32, len(b)/4)
	for i := range vec {
		vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	res.add(vec, nil)
	return nil
}

// base64Len is how many bytes base64 text s of a length divisible by 4
// holds.
func base64Len(s []byte) int {
	n := len(s) / 4 * 3
	for i := len(s) - 1; i >= len(s)-2 && i >= 0 && s[i] == '='; i-- {
		n--
	}
	return n
}

// base64Alphabet marks the bytes of standard base64's alphabet.
var base64Alphabet = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = true
	}
	return t
}()

// canonicalBase64 reports whether s is exactly what
// base64.StdEncoding.EncodeToString writes of a whole number of float32s:
// the alphabet's bytes only, padded to a multiple of 4 with at most two
// '=', no bits set beyond the data, 4·n bytes. It checks, without
// decoding, what a strict decode would.
func canonicalBase64(s []byte) bool {
	if len(s) == 0 || len(s)%4 != 0 || base64Len(s)%4 != 0 {
		return false
	}
	// The last quantum, with its padding, is decoded strictly: that
	// checks the padding and the bits beyond the data.
	last := s[len(s)-4:]
	var tail [3]byte
	if _, err := base64.StdEncoding.Strict().Decode(tail[:], last); err != nil {
		return false
	}
	body := s[:len(s)-4]
	ok := true
	for len(body) >= 8 {
		ok = ok && base64Alphabet[body[0]] && base64Alphabet[body[1]] && base64Alphabet[body[2]] && base64Alphabet[body[3]] &&
			base64Alphabet[body[4]] && base64Alphabet[body[5]] && base64Alphabet[body[6]] && base64Alphabet[body[7]]
		body = body[8:]
	}
	for _, c := range body {
		ok = ok && base64Alphabet[c]
	}
	return ok
}

// add appends one vector: its values, or its base64 text.
func (res *EmbeddingsResult) add(vec []float32, encoded []byte) {
	if encoded != nil && res.Encoded == nil {
		res.Encoded = make([][]byte, len(res.Vectors), cap(res.Vectors))
	}
	res.Vectors = append(res.Vectors, vec)
	if res.Encoded != nil {
		res.Encoded = append(res.Encoded, encoded)
	}
}

// Grow adds n empty positions for Place to fill and returns the first.
func (res *EmbeddingsResult) Grow(n int) (start int) {
	start = len(res.Vectors)
	res.Vectors = append(res.Vectors, make([][]float32, n)...)
	if res.Encoded != nil {
		res.Encoded = append(res.Encoded, make([][]byte, n)...)
	}
	return start
}

// Place puts the one vector of one, which AppendVector or
// AppendBase64Vector read, at res's position i (for providers that number
// their vectors; Grow made the position). ok is false when position i
// does not exist or already holds a vector.
func (res *EmbeddingsResult) Place(i int, one *EmbeddingsResult) (ok bool) {
	if i < 0 || i >= len(res.Vectors) || res.has(i) || len(one.Vectors) != 1 {
		return false
	}
	res.Vectors[i] = one.Vectors[0]
	if one.Encoded != nil && one.Encoded[0] != nil {
		if res.Encoded == nil {
			res.Encoded = make([][]byte, len(res.Vectors))
		}
		res.Encoded[i] = one.Encoded[0]
	}
	return true
}

// has reports whether position i holds a vector.
func (res *EmbeddingsResult) has(i int) bool {
	return res.Vectors[i] != nil || res.Encoded != nil && res.Encoded[i] != nil
}

// encodedLen is how many float32 values base64 text s holds.
func encodedLen(s []byte) int { return base64Len(s) / 4 }

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
	dims := 0
	for i := range res.Vectors {
		n := len(res.Vectors[i])
		if res.Encoded != nil && res.Encoded[i] != nil {
			n = encodedLen(res.Encoded[i])
		} else if res.Vectors[i] == nil {
			return dst, false // a position no vector filled
		}
		if req.Dimensions > 0 && n != req.Dimensions {
			return dst, false
		}
		dims += n
	}
	// One allocation for the whole answer: base64 takes 4 bytes for 3, a
	// float32 in decimal at most 15.
	if req.Base64 {
		dst = slices.Grow(dst, 128+len(req.Model)+64*len(res.Vectors)+dims*16/3)
	} else {
		dst = slices.Grow(dst, 128+len(req.Model)+64*len(res.Vectors)+dims*16)
	}
	w := jsonw.New(dst)
	o := w.Object()
	o.Str("object", "list")
	data := o.Array("data")
	var raw []byte
	for i, vec := range res.Vectors {
		var encoded []byte
		if res.Encoded != nil {
			encoded = res.Encoded[i]
		}
		e := data.Object()
		e.Str("object", "embedding")
		e.Int("index", int64(i))
		if encoded != nil && !req.Base64 {
			// Kept as base64 for an answer in numbers: not what the host
			// asks for, but read right all the same.
			var one EmbeddingsResult
			if one.AppendBase64Bytes(encoded) != nil {
				return dst, false
			}
			vec, encoded = one.Vectors[0], nil
		}
		switch {
		case encoded != nil:
			// Checked canonical base64 (AppendBase64Vector): its bytes
			// need no JSON escaping.
			e.Key("embedding").Base64Text(encoded)
		case req.Base64:
			raw = raw[:0]
			for _, f := range vec {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
			}
			e.Key("embedding").Base64(raw)
		default:
			a := e.Array("embedding")
			for _, f := range vec {
				a.Float32(f)
			}
			a.End()
		}
		e.End()
	}
	data.End()
	o.Str("model", req.Model)
	tokens := res.tokens(req)
	u := o.Object("usage")
	u.Int("prompt_tokens", tokens)
	u.Int("total_tokens", tokens)
	u.End()
	o.End()
	out, err := w.Finish()
	return out, err == nil
}
