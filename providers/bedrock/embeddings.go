package bedrock

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Embeddings translates unified embeddings requests (POST /v1/embeddings) to
// Bedrock's InvokeModel (POST /model/{modelId}/invoke) for the embeddings
// models Bedrock hosts:
//
//   - Amazon Titan Text Embeddings V2 (amazon.titan-embed-text-v2:0) and
//     G1 (amazon.titan-embed-text-v1, amazon.titan-embed-g1-text-02):
//     {"inputText": "…", "dimensions": 256|512|1024 (V2 only)}, one text a
//     call, so a request of n inputs is n InvokeModel calls; usage is the
//     sum of their inputTextTokenCount.
//   - Cohere Embed v3 (cohere.embed-english-v3, cohere.embed-multilingual-v3)
//     and v4 (cohere.embed-v4:0): {"texts": […], "input_type": …,
//     "embedding_types": ["float"], "output_dimension": 256|512|1024|1536
//     (v4 only)}, at most 96 texts a call; usage from the
//     X-Amzn-Bedrock-Input-Token-Count header.
//
// The model may be a model id, a cross-region inference profile id
// ("us.cohere.embed-v4:0") or an ARN naming one; an ARN that does not name
// the model (an application inference profile) needs an entry in
// BaseModels. The zero value is ready to use, and an Embeddings is safe for
// concurrent use.
type Embeddings struct {
	// BaseModels names, for a model id that does not say which model it
	// is, the model id it stands for ("amazon.titan-embed-text-v2:0"), as
	// Chat.BaseModels does.
	BaseModels map[string]string
}

var _ providers.Embeddings = Embeddings{}

// embedModel is the kind of embeddings model, which decides the body.
type embedModel int

const (
	titanG1  embedModel = iota + 1 // Titan Embeddings G1 - Text: inputText only
	titanV2                        // Titan Text Embeddings V2: dimensions 256, 512, 1024
	cohereV3                       // Cohere Embed v3: fixed dimensions
	cohereV4                       // Cohere Embed v4 and later: output_dimension
)

// cohereMaxTexts is how many texts Cohere Embed on Bedrock takes a call.
const cohereMaxTexts = 96

// embedModelOf tells the kind of embeddings model a family is, or 0.
func embedModelOf(fam family) embedModel {
	switch {
	case fam.provider == "amazon" && strings.HasPrefix(fam.name, "titan-embed-text-v2"):
		return titanV2
	case fam.provider == "amazon" && (strings.HasPrefix(fam.name, "titan-embed-text-v1") || strings.HasPrefix(fam.name, "titan-embed-g1-text")):
		return titanG1
	case fam.provider == "cohere" && strings.HasPrefix(fam.name, "embed-"):
		if strings.Contains(fam.name, "-v3") {
			return cohereV3
		}
		return cohereV4
	}
	return 0
}

// titanDims and cohereDims are the dimensions the models take.
var (
	titanDims  = []int{256, 512, 1024}
	cohereDims = []int{256, 512, 1024, 1536}
)

// EmbeddingsRequests writes the InvokeModel requests for req: one per input
// for Titan, one per 96 inputs for Cohere. Token-id inputs are refused
// (both take text), as are dimensions the model does not take: none on
// Titan G1 and Cohere v3, and other values than the model's sizes on Titan
// V2 and Cohere v4. input_type goes to Cohere ("query" as search_query,
// "document" as search_document, other values as they are; the default
// search_document) and is dropped for Titan, which has none; user is
// dropped.
func (e Embeddings) EmbeddingsRequests(req *providers.EmbeddingsRequest, model string) ([]providers.Request, error) {
	kind := embedModelOf(baseFamily(e.BaseModels, model))
	if kind == 0 {
		return nil, providers.InvalidParam("model",
			"%q is not an embeddings model the bedrock provider type translates (Amazon Titan Text Embeddings or Cohere Embed); "+
				"for an ARN that does not name its model, configure base_model", model)
	}
	if req.Tokens != nil {
		return nil, providers.UnsupportedBecause("input", "input as token ids is not supported by Bedrock's embeddings models: send text")
	}
	path, err := InvokePath(model)
	if err != nil {
		return nil, err
	}
	switch kind {
	case titanG1, cohereV3:
		if req.Dimensions > 0 {
			return nil, providers.UnsupportedBecause("dimensions", "dimensions is not supported by "+model+": its vectors have a fixed length")
		}
	case titanV2:
		if req.Dimensions > 0 && !oneOf(req.Dimensions, titanDims) {
			return nil, providers.InvalidParam("dimensions", "Titan Text Embeddings V2 takes dimensions 256, 512 or 1024, not %d", req.Dimensions)
		}
	case cohereV4:
		if req.Dimensions > 0 && !oneOf(req.Dimensions, cohereDims) {
			return nil, providers.InvalidParam("dimensions", "Cohere Embed v4 takes dimensions 256, 512, 1024 or 1536, not %d", req.Dimensions)
		}
	}

	if kind == titanG1 || kind == titanV2 {
		reqs := make([]providers.Request, len(req.Texts))
		for i, t := range req.Texts {
			w := jsonw.New(make([]byte, 0, len(t)+48))
			o := w.Object()
			o.Str("inputText", t)
			if req.Dimensions > 0 {
				o.Int("dimensions", int64(req.Dimensions))
			}
			o.End()
			b, err := w.Finish()
			if err != nil {
				return nil, err
			}
			reqs[i] = providers.Request{Path: path, Body: b}
		}
		return reqs, nil
	}

	inputType := req.InputType
	switch inputType {
	case "", "document":
		inputType = "search_document"
	case "query":
		inputType = "search_query"
	}
	reqs := make([]providers.Request, 0, (len(req.Texts)+cohereMaxTexts-1)/cohereMaxTexts)
	for start := 0; start < len(req.Texts); start += cohereMaxTexts {
		texts := req.Texts[start:min(start+cohereMaxTexts, len(req.Texts))]
		n := 96 + len(inputType)
		for _, t := range texts {
			n += len(t) + 3
		}
		w := jsonw.New(make([]byte, 0, n))
		o := w.Object()
		list := o.Array("texts")
		for _, t := range texts {
			list.Str(t)
		}
		list.End()
		o.Str("input_type", inputType)
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
		reqs = append(reqs, providers.Request{Path: path, Body: b})
	}
	return reqs, nil
}

func oneOf(n int, set []int) bool {
	for _, v := range set {
		if n == v {
			return true
		}
	}
	return false
}

var errMalformedEmbeddings = errors.New("malformed Bedrock embeddings answer")

// inputTokensHeader is where InvokeModel reports the input tokens.
const inputTokensHeader = "X-Amzn-Bedrock-Input-Token-Count"

// EmbeddingsResponse reads one InvokeModel answer, told apart by its shape:
// Titan's {"embedding": […], "inputTextTokenCount": n} (or its
// embeddingsByType.float), or Cohere's {"embeddings": {"float": [[…], …]}}
// (or the bare list of embeddings_floats). The tokens are Titan's
// inputTextTokenCount, else the X-Amzn-Bedrock-Input-Token-Count header,
// else Cohere's meta.billed_units.input_tokens.
func (Embeddings) EmbeddingsResponse(_ int, header http.Header, body []byte, res *providers.EmbeddingsResult) error {
	if !providers.ValidJSON(body) {
		return errMalformedEmbeddings
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return errMalformedEmbeddings
	}
	// One pass over the members: the answers are large.
	var embedding, byType, embeddings, titanCount, meta gjson.Result
	root.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "embedding":
			embedding = v
		case "embeddingsByType":
			byType = v
		case "embeddings":
			embeddings = v
		case "inputTextTokenCount":
			titanCount = v
		case "meta":
			meta = v
		}
		return true
	})
	// Titan counts its input in the body; Cohere's count is the header's,
	// which Bedrock sets on every InvokeModel answer.
	var first, second gjson.Result
	if embedding.Exists() || byType.Exists() {
		if !embedding.Exists() {
			embedding = byType.Get("float")
		}
		if err := res.AppendVector(embedding); err != nil {
			return err
		}
		first, second = titanCount, headerCount(header)
	} else {
		if embeddings.IsObject() {
			embeddings = embeddings.Get("float")
		}
		if !embeddings.IsArray() {
			return errMalformedEmbeddings
		}
		n := 0
		var err error
		embeddings.ForEach(func(_, v gjson.Result) bool {
			n++
			err = res.AppendVector(v)
			return err == nil
		})
		if err != nil {
			return err
		}
		if n == 0 {
			return errMalformedEmbeddings
		}
		first, second = headerCount(header), meta.Get("billed_units.input_tokens")
	}
	for _, t := range [2]gjson.Result{first, second} {
		if t.Type == gjson.Number && t.Num >= 0 && t.Num == float64(int64(t.Num)) {
			res.PromptTokens += int64(t.Num)
			res.Counted = true
			break
		}
	}
	return nil
}

// headerCount reads the X-Amzn-Bedrock-Input-Token-Count header as a
// number, or the zero Result.
func headerCount(h http.Header) gjson.Result {
	v := h.Get(inputTokensHeader)
	n, err := strconv.ParseInt(v, 10, 53)
	if err != nil {
		return gjson.Result{}
	}
	return gjson.Result{Type: gjson.Number, Num: float64(n), Raw: v}
}

// Error maps a Bedrock error answer, as Chat.Error does.
func (Embeddings) Error(status int, header http.Header, body []byte) *providers.Error {
	return Chat{}.Error(status, header, body)
}
