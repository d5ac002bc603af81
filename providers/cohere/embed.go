package cohere

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// EmbedPath is Cohere's Embed API v2 endpoint, relative to the provider's
// base URL (https://api.cohere.com).
const EmbedPath = "/v2/embed"

// MaxEmbedTexts is the most texts one Cohere embed request may hold
// (cohere-go's V2EmbedRequest: "Maximum number of texts per call is 96").
// A unified request with more inputs is sent as several requests of at
// most this many texts, whose answers are joined in input order.
const MaxEmbedTexts = 96

// OutputDimensions are the vector lengths Cohere's output_dimension takes
// (embed-v4 and newer; cohere-go's V2EmbedRequest documents exactly these).
var OutputDimensions = []int{256, 512, 1024, 1536}

// Embeddings is the translator of Cohere's Embed API v2 (POST /v2/embed; the
// field names and values are cohere-go's V2EmbedRequest and
// EmbedByTypeResponse). The zero value is ready to use and safe for concurrent
// use.
//
//   - input (strings) → texts, at most MaxEmbedTexts a request; token-id
//     inputs are refused with 400: Cohere embeds text only.
//   - input_type, which Cohere requires: modelgate's "query" →
//     search_query, "document" → search_document, another value (Cohere's
//     classification, clustering, …) as given; none → search_document.
//   - dimensions → output_dimension, one of OutputDimensions; another
//     value is refused with 400 rather than left for the model to ignore.
//   - embedding_types is always ["float"]: the gateway writes base64 itself.
//   - user is dropped: Cohere's embed has no end-user field.
//
// Usage is meta.billed_units.input_tokens (meta.tokens.input_tokens when
// Cohere bills none), summed over the requests.
type Embeddings struct{}

var _ providers.Embeddings = Embeddings{}

// EmbeddingsRequests writes Cohere's embed requests for req: one per
// MaxEmbedTexts inputs, in input order.
func (Embeddings) EmbeddingsRequests(req *providers.EmbeddingsRequest, model string) ([]providers.Request, error) {
	if req.Tokens != nil {
		e := providers.Unsupported("input (token ids)", providerName)
		e.Message = "token-id inputs are not supported by provider type " + providerName + ": it embeds text only"
		return nil, e
	}
	if req.Dimensions > 0 && !validOutputDimension(req.Dimensions) {
		e := providers.Unsupported("dimensions", providerName)
		e.Message = "dimensions " + strconv.Itoa(req.Dimensions) + " is not supported by provider type " + providerName +
			": its embed-v4 and newer models take 256, 512, 1024 or 1536"
		return nil, e
	}
	if len(req.Texts) == 0 {
		return nil, providers.InvalidParam("input", "input is required")
	}
	inputType := EmbedInputType(req.InputType)

	reqs := make([]providers.Request, 0, (len(req.Texts)+MaxEmbedTexts-1)/MaxEmbedTexts)
	for start := 0; start < len(req.Texts); start += MaxEmbedTexts {
		texts := req.Texts[start:min(start+MaxEmbedTexts, len(req.Texts))]
		size := 96 + len(model) + len(inputType)
		for _, t := range texts {
			size += len(t) + 3
		}
		w := jsonw.New(make([]byte, 0, size))
		o := w.Object()
		o.Str("model", model)
		o.Str("input_type", inputType)
		list := o.Array("texts")
		for _, t := range texts {
			list.Str(t)
		}
		list.End()
		types := o.Array("embedding_types")
		types.Str("float")
		types.End()
		if req.Dimensions > 0 {
			o.Int("output_dimension", int64(req.Dimensions))
		}
		o.End()
		b, err := w.Finish()
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, providers.Request{Path: EmbedPath, Body: b})
	}
	return reqs, nil
}

// EmbedInputType is Cohere's input_type for modelgate's input_type t:
// "query" → search_query, "document" or none → search_document (Cohere
// requires one; documents are what an index embeds most), any other value
// as it is (classification, clustering, image, or a newer one).
func EmbedInputType(t string) string {
	switch t {
	case "", "document":
		return "search_document"
	case "query":
		return "search_query"
	}
	return t
}

func validOutputDimension(d int) bool {
	for _, v := range OutputDimensions {
		if v == d {
			return true
		}
	}
	return false
}

var errMalformedEmbed = errors.New("malformed Cohere embed answer")

// EmbeddingsResponse reads one Cohere embed answer: embeddings.float (the
// by-type answer v2 sends), else a bare embeddings array (v1's and
// Bedrock's embeddings_floats), else embeddings.base64 (little-endian
// float32 bytes), appending the vectors in order; and the tokens billed.
func (Embeddings) EmbeddingsResponse(_ int, _ http.Header, body []byte, res *providers.EmbeddingsResult) error {
	if !providers.ValidJSON(body) {
		return errMalformedEmbed
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return errMalformedEmbed
	}
	emb := root.Get("embeddings")
	vecs := emb
	if !emb.IsArray() {
		vecs = emb.Get("float")
	}
	var err error
	n := 0
	switch {
	case vecs.IsArray():
		vecs.ForEach(func(_, v gjson.Result) bool {
			err = res.AppendVector(v)
			n++
			return err == nil
		})
	case emb.Get("base64").IsArray():
		emb.Get("base64").ForEach(func(_, v gjson.Result) bool {
			if v.Type != gjson.String {
				err = errMalformedEmbed
			} else {
				err = res.AppendBase64Vector(v.Str)
			}
			n++
			return err == nil
		})
	default:
		return errMalformedEmbed
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return errMalformedEmbed
	}
	meta := root.Get("meta")
	t := meta.Get("billed_units.input_tokens")
	if t.Type != gjson.Number {
		t = meta.Get("tokens.input_tokens")
	}
	if t.Type == gjson.Number {
		res.PromptTokens += count(t.Num)
		res.Counted = true
	}
	return nil
}

// Error maps a Cohere error answer as Chat.Error does: the embed endpoint
// answers failures in the same shape and statuses.
func (Embeddings) Error(status int, header http.Header, body []byte) *providers.Error {
	return Chat{}.Error(status, header, body)
}
