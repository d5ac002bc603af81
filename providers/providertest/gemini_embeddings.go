package providertest

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Google's embeddings, served by the gemini and vertex formats on a model:
//
//	gemini  POST /v1beta/models/{m}:batchEmbedContents {"requests":[{model, content, taskType?, title?, outputDimensionality?}]}
//	        → {"embeddings":[{"values":[…]}]}, no usage; at most 100 requests
//	gemini  POST /v1beta/models/{m}:embedContent {content, taskType?, title?, outputDimensionality?}
//	        → {"embedding":{"values":[…]}}
//	vertex  POST …/models/{m}:predict {"instances":[{content, task_type?, title?}], "parameters":{outputDimensionality?, autoTruncate?}}
//	        → {"predictions":[{"embeddings":{"values":[…],"statistics":{"token_count","truncated"}}}], "metadata":{…}};
//	        at most 250 instances and 20,000 tokens, one instance for gemini-embedding-001
//	vertex  POST …/models/{m}:embedContent {content, embedContentConfig:{taskType?, title?, outputDimensionality?, autoTruncate?}}
//	        → {"embedding":{"values":[…]}, "usageMetadata":{"promptTokenCount"}, "truncated":false}
//
// Vertex serves each model on one of its two methods, as go-genai chooses
// them: embedContent for the newer Gemini embedding models (a name with
// "gemini" other than gemini-embedding-001, or "maas"), predict for the
// others; the other method is a 400. Vectors are EmbeddingVector's of the
// content's text (its text parts joined with spaces), tokens word counts.

// googleTaskTypes are the task types Google's embedding models take.
var googleTaskTypes = map[string]bool{
	"TASK_TYPE_UNSPECIFIED": true, "RETRIEVAL_QUERY": true, "RETRIEVAL_DOCUMENT": true, "SEMANTIC_SIMILARITY": true,
	"CLASSIFICATION": true, "CLUSTERING": true, "QUESTION_ANSWERING": true, "FACT_VERIFICATION": true, "CODE_RETRIEVAL_QUERY": true,
}

// Google's embeddings limits.
const (
	maxGoogleBatchEmbed   = 100
	maxVertexInstances    = 250
	maxVertexPredictWords = 20000
	maxGoogleDims         = 3072
)

// vertexEmbedsContent reports whether Vertex serves model on embedContent
// (else on predict).
func vertexEmbedsContent(model string) bool {
	return strings.Contains(model, "gemini") && model != "gemini-embedding-001" || strings.Contains(model, "maas")
}

// googleEmbedding is one input to embed, checked.
type googleEmbedding struct {
	text string
	dims int
}

// serveGoogleEmbeddings answers an embeddings method of the gemini or
// vertex format.
func serveGoogleEmbeddings(c *call, method string, vertex bool) {
	root := gjson.ParseBytes(c.body)
	if !validJSON(c.body) || !root.IsObject() {
		googleInvalid(c.w, "Invalid JSON payload received. Expected an object.")
		return
	}
	var inputs []googleEmbedding
	var msg string
	switch {
	case method == "batchEmbedContents":
		inputs, msg = checkBatchEmbed(root, c.model)
	case method == "embedContent" && !vertex:
		var in googleEmbedding
		in, msg = checkEmbedRequest("", root, c.model, false)
		inputs = []googleEmbedding{in}
	case method == "embedContent":
		if !vertexEmbedsContent(c.model) {
			msg = "The model " + c.model + " does not support embedContent; use predict."
			break
		}
		var in googleEmbedding
		in, msg = checkEmbedRequest("", root, c.model, true)
		inputs = []googleEmbedding{in}
	default: // predict
		if vertexEmbedsContent(c.model) {
			msg = "The model " + c.model + " does not support predict; use embedContent."
			break
		}
		inputs, msg = checkPredict(root, c.model)
	}
	if msg != "" {
		googleInvalid(c.w, msg)
		return
	}
	if c.scripted() {
		return
	}
	b := make([]byte, 0, 128+len(inputs)*(inputs[0].dims*13+96))
	tokens := 0
	switch method {
	case "batchEmbedContents":
		b = append(b, `{"embeddings":[`...)
		for i, in := range inputs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendGoogleValues(append(b, '{'), in)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	case "embedContent":
		in := inputs[0]
		b = appendGoogleValues(append(b, `{"embedding":{`...), in)
		b = append(b, '}')
		if vertex {
			b = append(b, `,"usageMetadata":{"promptTokenCount":`...)
			b = strconv.AppendInt(b, int64(c.s.promptTokens(in.text)), 10)
			b = append(b, `,"totalTokenCount":`...)
			b = strconv.AppendInt(b, int64(c.s.promptTokens(in.text)), 10)
			b = append(b, `},"truncated":false`...)
		}
		b = append(b, '}')
	default: // predict
		chars := 0
		b = append(b, `{"predictions":[`...)
		for i, in := range inputs {
			if i > 0 {
				b = append(b, ',')
			}
			n := c.s.promptTokens(in.text)
			tokens += n
			chars += len([]rune(in.text))
			b = append(b, `{"embeddings":{"statistics":{"truncated":false,"token_count":`...)
			b = strconv.AppendInt(b, int64(n), 10)
			b = appendGoogleValues(append(b, "},"...), in)
			b = append(b, "}}"...)
		}
		b = append(b, `],"metadata":{"billableCharacterCount":`...)
		b = strconv.AppendInt(b, int64(chars), 10)
		b = append(b, "}}"...)
	}
	writeJSON(c.w, http.StatusOK, b)
}

// appendGoogleValues appends "values":[…], the input's vector.
func appendGoogleValues(b []byte, in googleEmbedding) []byte {
	b = append(b, `"values":[`...)
	for j, x := range EmbeddingVector(in.text, in.dims) {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

// checkBatchEmbed checks a BatchEmbedContentsRequest: every request names
// the model of the path.
func checkBatchEmbed(root gjson.Result, model string) ([]googleEmbedding, string) {
	var requests gjson.Result
	if bad := readFields(root, []field{{"requests", &requests}}, func(string) bool { return true }); bad != "" {
		return nil, unknownName(bad)
	}
	list := requests.Array()
	switch {
	case !requests.IsArray() || len(list) == 0:
		return nil, "* BatchEmbedContentsRequest.requests: requests must not be empty"
	case len(list) > maxGoogleBatchEmbed:
		return nil, "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch"
	}
	inputs := make([]googleEmbedding, len(list))
	for i, r := range list {
		p := "requests[" + strconv.Itoa(i) + "]"
		if !r.IsObject() {
			return nil, "Invalid value at '" + p + "', expected an object"
		}
		if m := r.Get("model"); m.Str != "models/"+model {
			return nil, "* BatchEmbedContentsRequest." + p + ".model: the model of every request must be the batch's, models/" + model + ", not " + strconv.Quote(m.String())
		}
		var msg string
		if inputs[i], msg = checkEmbedRequest(p, r, model, false); msg != "" {
			return nil, msg
		}
	}
	return inputs, ""
}

// checkEmbedRequest checks an EmbedContentRequest of the Developer API
// (vertex false: content, taskType, title, outputDimensionality, model) or
// of Vertex AI (content and embedContentConfig).
func checkEmbedRequest(p string, r gjson.Result, model string, vertex bool) (googleEmbedding, string) {
	var in googleEmbedding
	var content, config gjson.Result
	fields := []field{{"content", &content}}
	cfg := r
	if vertex {
		fields = append(fields, field{"embedContentConfig", &config})
	} else {
		config = r
	}
	if bad := readFields(r, fields, func(k string) bool {
		return vertex || k != "taskType" && k != "title" && k != "outputDimensionality" && k != "model"
	}); bad != "" {
		return in, unknownName(bad)
	}
	if vertex && config.Exists() {
		if !config.IsObject() {
			return in, "Invalid value at 'embed_content_config', expected an object"
		}
		if bad := readFields(config, nil, func(k string) bool {
			return k != "taskType" && k != "title" && k != "outputDimensionality" && k != "autoTruncate"
		}); bad != "" {
			return in, unknownName(bad)
		}
		cfg = config
	} else if vertex {
		cfg = gjson.Result{}
	}
	if p != "" {
		p += "."
	}
	text, msg := embedContentText(p+"content", content)
	if msg != "" {
		return in, msg
	}
	in.text = text
	if msg := checkTask(p, cfg.Get("taskType"), cfg.Get("title")); msg != "" {
		return in, msg
	}
	in.dims, msg = googleDims(p+"output_dimensionality", cfg.Get("outputDimensionality"))
	return in, msg
}

// embedContentText checks a Content to embed (text parts, a role of user
// if any) and returns its text.
func embedContentText(p string, content gjson.Result) (string, string) {
	if !content.IsObject() {
		return "", "* EmbedContentRequest." + p + ": content is required"
	}
	if bad := readFields(content, nil, func(k string) bool { return k != "role" && k != "parts" }); bad != "" {
		return "", unknownName(bad)
	}
	if r := content.Get("role"); r.Exists() && r.Str != "user" {
		return "", "Please use a valid role: user."
	}
	parts := content.Get("parts").Array()
	if len(parts) == 0 {
		return "", "* EmbedContentRequest." + p + ".parts: contents.parts must not be empty."
	}
	texts := make([]string, len(parts))
	for i, part := range parts {
		if bad := readFields(part, nil, func(k string) bool { return k != "text" }); bad != "" {
			return "", "* EmbedContentRequest." + p + ".parts[" + strconv.Itoa(i) + "]: only text parts can be embedded by this model, not " + strconv.Quote(bad)
		}
		t := part.Get("text")
		if t.Type != gjson.String || t.Str == "" {
			return "", "Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again."
		}
		texts[i] = t.Str
	}
	return strings.Join(texts, " "), ""
}

// checkTask checks a task type and a title, which only a
// RETRIEVAL_DOCUMENT takes.
func checkTask(p string, task, title gjson.Result) string {
	if task.Exists() && (task.Type != gjson.String || !googleTaskTypes[task.Str]) {
		return "Invalid value at '" + p + "task_type' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), " + strconv.Quote(task.String())
	}
	if title.Exists() {
		if title.Type != gjson.String {
			return "Invalid value at '" + p + "title' (TYPE_STRING)"
		}
		if task.Str != "RETRIEVAL_DOCUMENT" {
			return "* EmbedContentRequest." + p + "title: title is only applicable when task_type is RETRIEVAL_DOCUMENT."
		}
	}
	return ""
}

// googleDims checks an outputDimensionality and returns the vector length:
// it, or EmbeddingDims when absent.
func googleDims(p string, v gjson.Result) (int, string) {
	if !v.Exists() {
		return EmbeddingDims, ""
	}
	if !isInt(v, 1) || v.Int() > maxGoogleDims {
		return 0, "* EmbedContentRequest." + p + ": output_dimensionality must be an integer from 1 to " + strconv.Itoa(maxGoogleDims) + ", not " + v.Raw
	}
	return int(v.Int()), ""
}

// checkPredict checks a Vertex AI predict request for a text embedding
// model.
func checkPredict(root gjson.Result, model string) ([]googleEmbedding, string) {
	var instances, params gjson.Result
	if bad := readFields(root, []field{{"instances", &instances}, {"parameters", &params}}, func(string) bool { return true }); bad != "" {
		return nil, unknownName(bad)
	}
	list := instances.Array()
	switch {
	case !instances.IsArray() || len(list) == 0:
		return nil, "instances must be a non-empty list"
	case len(list) > maxVertexInstances:
		return nil, "The number of instances (" + strconv.Itoa(len(list)) + ") exceeds the maximum of 250 for this model."
	case len(list) > 1 && model == "gemini-embedding-001":
		return nil, "Unable to submit request because the model gemini-embedding-001 supports only one instance per request. Send one input text per request."
	}
	dims := EmbeddingDims
	if params.Exists() {
		if !params.IsObject() {
			return nil, "parameters must be an object"
		}
		if bad := readFields(params, nil, func(k string) bool { return k != "outputDimensionality" && k != "autoTruncate" }); bad != "" {
			return nil, unknownName(bad)
		}
		if at := params.Get("autoTruncate"); at.Exists() && at.Type != gjson.True && at.Type != gjson.False {
			return nil, "parameters.autoTruncate must be a boolean"
		}
		var msg string
		if dims, msg = googleDims("parameters.outputDimensionality", params.Get("outputDimensionality")); msg != "" {
			return nil, msg
		}
	}
	inputs := make([]googleEmbedding, len(list))
	words := 0
	for i, in := range list {
		p := "instances[" + strconv.Itoa(i) + "]."
		if !in.IsObject() {
			return nil, "instances[" + strconv.Itoa(i) + "] must be an object"
		}
		if bad := readFields(in, nil, func(k string) bool { return k != "content" && k != "task_type" && k != "title" }); bad != "" {
			return nil, unknownName(bad)
		}
		text := in.Get("content")
		if text.Type != gjson.String || text.Str == "" {
			return nil, p + "content must be a non-empty string"
		}
		if msg := checkTask(p, in.Get("task_type"), in.Get("title")); msg != "" {
			return nil, msg
		}
		words += countWords(text.Str)
		inputs[i] = googleEmbedding{text: text.Str, dims: dims}
	}
	if words > maxVertexPredictWords {
		return nil, "Unable to submit request because the input token count is " + strconv.Itoa(words) + " but model only supports up to " +
			strconv.Itoa(maxVertexPredictWords) + ". Reduce the input token count and try again."
	}
	return inputs, ""
}
