package gemini

import (
	"errors"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
)

// Embeddings translates unified embeddings requests for the Gemini API, as
// Google's go-genai SDK sends them:
//
//   - the Developer API embeds with :batchEmbedContents, one request per
//     input in "requests", at most 100 of them per call (Google's limit);
//     its answer reports no token usage;
//   - Vertex AI embeds gemini-embedding-001 and the text-embedding-* and
//     text-multilingual-embedding-* models with :predict ("instances", at
//     most 250 a call and about 20,000 tokens; gemini-embedding-001 takes
//     one instance a call) and reads statistics.token_count as usage; the
//     newer Gemini embedding models (every other name containing "gemini",
//     and the open "maas" models) with :embedContent, one input a call,
//     with usageMetadata.promptTokenCount as usage.
//
// input_type becomes the task type: "query" RETRIEVAL_QUERY, "document"
// RETRIEVAL_DOCUMENT, any other value (SEMANTIC_SIMILARITY,
// CLASSIFICATION, CLUSTERING, QUESTION_ANSWERING, FACT_VERIFICATION,
// CODE_RETRIEVAL_QUERY) as it is. dimensions becomes outputDimensionality.
// Token-id inputs are refused: Gemini embeds text. user is dropped.
//
// Chat names the service (Vertex, Project, Location) exactly as for chat,
// and its Error maps Google's error answers.
type Embeddings struct {
	Chat
}

var _ providers.Embeddings = Embeddings{}

const (
	// maxBatchEmbed is the most requests one batchEmbedContents takes.
	maxBatchEmbed = 100
	// maxPredict is the most instances one Vertex predict call takes.
	maxPredict = 250
	// predictBudget bounds the bytes of text in one predict call, so that
	// it stays under Vertex's 20,000 tokens a request for most text
	// (about 2 bytes a token; English runs near 4, CJK text near 3).
	predictBudget = 40_000
)

// Vertex AI's embeddings methods.
const (
	methodPredict      = ":predict"
	methodEmbedContent = ":embedContent"
)

// vertexEmbedMethod is the method Vertex AI embeds model with, as go-genai
// chooses it (tIsVertexEmbedContentModel), applied to the model's own name
// (after any "publishers/…/models/" prefix): :embedContent for names
// containing "gemini" other than gemini-embedding-001, and for the "maas"
// models; :predict for the others (text-embedding-005,
// text-multilingual-embedding-002, gemini-embedding-001, endpoints).
func vertexEmbedMethod(model string) string {
	if strings.HasPrefix(model, "endpoints/") {
		return methodPredict
	}
	name := model[strings.LastIndexByte(model, '/')+1:]
	if strings.Contains(name, "gemini") && name != "gemini-embedding-001" || strings.Contains(name, "maas") {
		return methodEmbedContent
	}
	return methodPredict
}

// taskType is Gemini's task type for a unified input_type.
func taskType(inputType string) string {
	switch inputType {
	case "query":
		return "RETRIEVAL_QUERY"
	case "document":
		return "RETRIEVAL_DOCUMENT"
	}
	return inputType
}

// EmbeddingsRequests writes the requests for req, cut into as many calls
// as the service's limits need; their answers, read in order, give the
// vectors in input order.
func (e Embeddings) EmbeddingsRequests(req *providers.EmbeddingsRequest, model string) ([]providers.Request, error) {
	if req.Tokens != nil {
		// The param other translators name for token ids, so clients see one.
		return nil, e.unsupported("input (token ids)", "token-id inputs are not supported: Gemini embeds text")
	}
	res, err := e.resource(model)
	if err != nil {
		return nil, err
	}
	task := taskType(req.InputType)
	switch {
	case !e.Vertex:
		return e.batchRequests(req, res, task)
	case vertexEmbedMethod(model) == methodEmbedContent:
		return embedContentRequests(req, res, task)
	}
	most := maxPredict
	if strings.HasSuffix(res, "/gemini-embedding-001") {
		most = 1
	}
	return predictRequests(req, res, task, most)
}

// batchRequests writes the Developer API's batchEmbedContents calls:
//
//	{"requests":[{"model":"models/…","content":{"parts":[{"text":"…"}]},
//	              "taskType":"…","outputDimensionality":N}, …]}
func (e Embeddings) batchRequests(req *providers.EmbeddingsRequest, res, task string) ([]providers.Request, error) {
	name := res[1:] // "models/…" or "tunedModels/…": each request names the model of the path
	reqs := make([]providers.Request, 0, (len(req.Texts)+maxBatchEmbed-1)/maxBatchEmbed)
	for start := 0; start < len(req.Texts); start += maxBatchEmbed {
		texts := req.Texts[start:min(start+maxBatchEmbed, len(req.Texts))]
		w := jsonw.New(make([]byte, 0, 16+len(texts)*(len(name)+64)+textSize(texts)))
		o := w.Object()
		list := o.Array("requests")
		for _, t := range texts {
			r := list.Object()
			r.Str("model", name)
			writeTextContent(r, "", t)
			if task != "" {
				r.Str("taskType", task)
			}
			if req.Dimensions > 0 {
				r.Int("outputDimensionality", int64(req.Dimensions))
			}
			r.End()
		}
		list.End()
		o.End()
		b, err := w.Finish()
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, providers.Request{Path: res + ":batchEmbedContents", Body: b})
	}
	return reqs, nil
}

// writeTextContent writes "content": one text part, t, of role (none
// when "").
func writeTextContent(o jsonw.Object, role, t string) {
	c := o.Object("content")
	if role != "" {
		c.Str("role", role)
	}
	parts := c.Array("parts")
	p := parts.Object()
	p.Str("text", t)
	p.End()
	parts.End()
	c.End()
}

// predictRequests writes Vertex AI's predict calls, each of at most most
// instances and about predictBudget bytes of text:
//
//	{"instances":[{"content":"…","task_type":"…"}, …],
//	 "parameters":{"outputDimensionality":N}}
func predictRequests(req *providers.EmbeddingsRequest, res, task string, most int) ([]providers.Request, error) {
	var reqs []providers.Request
	for start := 0; start < len(req.Texts); {
		end, size := start, 0
		for end < len(req.Texts) && end-start < most && (end == start || size+len(req.Texts[end]) <= predictBudget) {
			size += len(req.Texts[end])
			end++
		}
		texts := req.Texts[start:end]
		start = end
		w := jsonw.New(make([]byte, 0, 64+len(texts)*48+textSize(texts)))
		o := w.Object()
		list := o.Array("instances")
		for _, t := range texts {
			in := list.Object()
			in.Str("content", t)
			if task != "" {
				in.Str("task_type", task)
			}
			in.End()
		}
		list.End()
		if req.Dimensions > 0 {
			p := o.Object("parameters")
			p.Int("outputDimensionality", int64(req.Dimensions))
			p.End()
		}
		o.End()
		b, err := w.Finish()
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, providers.Request{Path: res + methodPredict, Body: b})
	}
	return reqs, nil
}

// embedContentRequests writes Vertex AI's embedContent calls, one per
// input:
//
//	{"content":{"role":"user","parts":[{"text":"…"}]},
//	 "embedContentConfig":{"taskType":"…","outputDimensionality":N}}
func embedContentRequests(req *providers.EmbeddingsRequest, res, task string) ([]providers.Request, error) {
	reqs := make([]providers.Request, len(req.Texts))
	for i, t := range req.Texts {
		w := jsonw.New(make([]byte, 0, 128+len(t)))
		o := w.Object()
		writeTextContent(o, "user", t)
		if task != "" || req.Dimensions > 0 {
			cfg := o.Object("embedContentConfig")
			if task != "" {
				cfg.Str("taskType", task)
			}
			if req.Dimensions > 0 {
				cfg.Int("outputDimensionality", int64(req.Dimensions))
			}
			cfg.End()
		}
		o.End()
		b, err := w.Finish()
		if err != nil {
			return nil, err
		}
		reqs[i] = providers.Request{Path: res + methodEmbedContent, Body: b}
	}
	return reqs, nil
}

// textSize is the bytes texts take, for sizing buffers.
func textSize(texts []string) int {
	n := 0
	for _, t := range texts {
		n += len(t) + 8
	}
	return n
}

var errMalformedEmbeddings = errors.New("malformed Gemini embeddings answer")

// EmbeddingsResponse reads one answer's vectors, in order, and its usage:
// batchEmbedContents' embeddings[].values (no usage: res.Counted stays
// false); predict's predictions[].embeddings.values with
// statistics.token_count; embedContent's embedding.values with
// usageMetadata.promptTokenCount.
func (e Embeddings) EmbeddingsResponse(_ int, _ http.Header, body []byte, res *providers.EmbeddingsResult) error {
	if !providers.ValidJSON(body) {
		return errMalformedEmbeddings
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return errMalformedEmbeddings
	}
	var err error
	each := func(list gjson.Result, vector func(gjson.Result) gjson.Result) {
		if !list.IsArray() || len(list.Array()) == 0 {
			err = errMalformedEmbeddings
			return
		}
		list.ForEach(func(_, item gjson.Result) bool {
			v := vector(item)
			err = res.AppendVector(v.Get("values"))
			if c := v.Get("statistics.token_count"); err == nil && c.Type == gjson.Number {
				res.PromptTokens += c.Int()
				res.Counted = true
			}
			return err == nil
		})
	}
	self := func(v gjson.Result) gjson.Result { return v }
	switch {
	case !e.Vertex:
		each(root.Get("embeddings"), self)
	case root.Get("predictions").Exists():
		each(root.Get("predictions"), func(p gjson.Result) gjson.Result { return p.Get("embeddings") })
	case root.Get("embedding").Exists():
		err = res.AppendVector(root.Get("embedding.values"))
		if c := root.Get("usageMetadata.promptTokenCount"); err == nil && c.Type == gjson.Number {
			res.PromptTokens += c.Int()
			res.Counted = true
		}
	default:
		err = errMalformedEmbeddings
	}
	return err
}
