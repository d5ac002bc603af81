package providertest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// geminiFormat is the Gemini Developer API:
// POST /v1beta/models/{model}:generateContent, and
// :streamGenerateContent?alt=sse for a stream, with the key in
// x-goog-api-key (or ?key=). It owns every path under /v1beta/: their 404s
// are Google's.
type geminiFormat struct{}

// vertexFormat is Gemini on Vertex AI (and Claude, see vertex_claude.go): POST
// /v1/projects/{project}/locations/{location}/publishers/google/models/
// {model}:generateContent (or :streamGenerateContent?alt=sse) with an OAuth
// bearer token, and express mode's /v1/publishers/google/models/{model}:…
// with x-goog-api-key. Bodies and answers are the Developer API's; Vertex
// requires every content's role and every fileData's mimeType. It also
// serves the Google token endpoint (GoogleTokenPath) that issues the access
// tokens: tokens it issued are valid until they expire, and other bearer
// tokens pass as keys do (Options.Keys["vertex"]).
type vertexFormat struct{}

const (
	geminiPrefix  = "/v1beta/"
	vertexPrefix  = "/v1/projects/"
	vertexExpress = "/v1/publishers/"
)

func (geminiFormat) name() string { return "gemini" }
func (vertexFormat) name() string { return "vertex" }

// geminiMethods are the methods each service serves on a model: content
// generation, and embeddings (the Developer API's batchEmbedContents and
// embedContent, Vertex AI's predict and embedContent).
var geminiMethods = [2]map[string]bool{
	{"generateContent": true, "streamGenerateContent": true, "batchEmbedContents": true, "embedContent": true},
	{"generateContent": true, "streamGenerateContent": true, "predict": true, "embedContent": true},
}

// geminiTarget splits a model method's path below its API prefix into the
// model and the method, or reports that it is not one.
func geminiTarget(rest string, vertex bool) (model, method string, ok bool) {
	res, method, found := strings.Cut(rest, ":")
	service := 0
	if vertex {
		service = 1
	}
	if !found || !geminiMethods[service][method] {
		return "", "", false
	}
	segs := strings.Split(res, "/")
	switch {
	case !vertex && len(segs) == 2 && (segs[0] == "models" || segs[0] == "tunedModels"):
		model = segs[1]
	case vertex && len(segs) == 7 && segs[1] == "locations" && segs[3] == "publishers" && segs[5] == "models":
		model = segs[6] // "projects/" was cut off: {p}/locations/{l}/publishers/{pub}/models/{m}
	case vertex && len(segs) == 4 && segs[0] == "publishers" && segs[2] == "models":
		model = segs[3] // express mode
	default:
		return "", "", false
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			return "", "", false
		}
	}
	return model, method, model != ""
}

func (geminiFormat) route(r *http.Request) routing {
	rest, ok := strings.CutPrefix(r.URL.Path, geminiPrefix)
	if !ok {
		return notMine
	}
	if _, _, ok := geminiTarget(rest, false); !ok || r.Method != http.MethodPost {
		return owned
	}
	return served
}

func (vertexFormat) route(r *http.Request) routing {
	p := r.URL.Path
	if p == GoogleTokenPath {
		return postTo(r, p)
	}
	rest, ok := strings.CutPrefix(p, vertexPrefix)
	if !ok {
		if !strings.HasPrefix(p, vertexExpress) {
			return notMine
		}
		rest = strings.TrimPrefix(p, "/v1/")
	}
	if _, claude := vertexClaudePath(rest); claude && r.Method == http.MethodPost {
		return served
	}
	if _, _, ok := geminiTarget(rest, true); !ok || r.Method != http.MethodPost {
		return owned
	}
	return served
}

func (geminiFormat) headers(http.Header, string) {}
func (vertexFormat) headers(http.Header, string) {}

func (geminiFormat) authorized(r *http.Request, want string) bool {
	return keyOK(geminiKey(r), want)
}

// geminiKey is the API key of a request: x-goog-api-key, else ?key=.
func geminiKey(r *http.Request) string {
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// authorized takes a bearer token on project paths (the fake's own tokens
// are checked in serve, where the server's token table is), an API key in
// express mode, and nothing on the token endpoint, whose credential is the
// assertion in its body.
func (vertexFormat) authorized(r *http.Request, want string) bool {
	switch p := r.URL.Path; {
	case p == GoogleTokenPath:
		return true
	case strings.HasPrefix(p, vertexExpress):
		return keyOK(geminiKey(r), want)
	}
	tok := bearer(r)
	return strings.HasPrefix(tok, googleTokenPrefix) || keyOK(tok, want)
}

func (geminiFormat) model(r *http.Request, _ []byte) string {
	m, _, _ := geminiTarget(strings.TrimPrefix(r.URL.Path, geminiPrefix), false)
	return m
}

func (vertexFormat) model(r *http.Request, _ []byte) string {
	rest, ok := strings.CutPrefix(r.URL.Path, vertexPrefix)
	if !ok {
		rest = strings.TrimPrefix(r.URL.Path, "/v1/")
	}
	if _, claude := vertexClaudePath(rest); claude {
		res, _, _ := strings.Cut(rest, ":")
		return res[strings.LastIndexByte(res, '/')+1:]
	}
	m, _, _ := geminiTarget(rest, true)
	return m
}

func (geminiFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	googleFault(w, r, f, false)
}

func (vertexFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	googleFault(w, r, f, true)
}

// googleFault writes a fault as Google's APIs answer it. The Developer API
// refuses a request without a key with 403 PERMISSION_DENIED and a wrong
// key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID); Vertex AI a
// missing, wrong or expired token with 401 UNAUTHENTICATED.
func googleFault(w http.ResponseWriter, r *http.Request, f fault, vertex bool) {
	switch f {
	case notFound:
		googleError(w, http.StatusNotFound, "NOT_FOUND", "Requested entity was not found: "+r.Method+" "+r.URL.Path, "")
	case tooLarge:
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request payload size exceeds the limit: "+strconv.Itoa(MaxBody)+" bytes.", "")
	case unreadable:
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msgUnreadable, "")
	case unauthorized:
		switch {
		case vertex || strings.HasPrefix(r.URL.Path, vertexExpress):
			googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED",
				"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
				`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"ACCESS_TOKEN_TYPE_UNSUPPORTED","domain":"googleapis.com"}`)
		case geminiKey(r) == "":
			googleError(w, http.StatusForbidden, "PERMISSION_DENIED",
				"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.", "")
		default:
			googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
				`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}}`)
		}
	case rateLimited:
		googleError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED",
			"You exceeded your current quota, please check your plan and billing details. Please retry in 1s.",
			`{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel"}]},`+
				`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1s"}`)
	case serverError:
		googleError(w, http.StatusInternalServerError, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", "")
	case overloaded:
		googleError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The model is overloaded. Please try again later.", "")
	}
}

// googleError writes Google's error envelope, {"error":{"code","message",
// "status","details"}}; details is the raw JSON of its elements.
func googleError(w http.ResponseWriter, code int, status, msg, details string) {
	writeJSON(w, code, appendGoogleError(nil, code, status, msg, details))
}

func appendGoogleError(b []byte, code int, status, msg, details string) []byte {
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"status":`...)
	b = appendString(b, status)
	if details != "" {
		b = append(b, `,"details":[`...)
		b = append(b, details...)
		b = append(b, ']')
	}
	return append(b, "}}"...)
}

// googleInvalid writes a 400 INVALID_ARGUMENT.
func googleInvalid(w http.ResponseWriter, msg string) {
	googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg, "")
}

func (geminiFormat) serve(c *call) { serveGenerate(c, false) }

func (vertexFormat) serve(c *call) {
	if c.r.URL.Path == GoogleTokenPath {
		serveGoogleToken(c)
		return
	}
	if tok := bearer(c.r); strings.HasPrefix(tok, googleTokenPrefix) && !strings.HasPrefix(c.r.URL.Path, vertexExpress) {
		issued, expired := c.s.googleTokenState(tok)
		if !issued || expired {
			reason := "ACCESS_TOKEN_EXPIRED"
			if !issued {
				reason = "ACCESS_TOKEN_TYPE_UNSUPPORTED"
			}
			googleError(c.w, http.StatusUnauthorized, "UNAUTHENTICATED",
				"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
				`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"`+reason+`","domain":"googleapis.com"}`)
			return
		}
	}
	if method, claude := vertexClaudePath(strings.TrimPrefix(c.r.URL.Path, vertexPrefix)); claude && strings.HasPrefix(c.r.URL.Path, vertexPrefix) {
		serveVertexClaude(c, method)
		return
	}
	serveGenerate(c, true)
}

// geRequest is a GenerateContentRequest, read.
type geRequest struct {
	contents, systemInstruction, tools, toolConfig, generationConfig gjson.Result
	safetySettings, serviceTier                                      gjson.Result
	list                                                             []gjson.Result // contents
}

// geminiFields are the top-level fields of a GenerateContentRequest, by
// service: a field of neither (an OpenAI field a gateway forgot) is a 400.
var geminiFields = map[string]bool{
	"contents": true, "systemInstruction": true, "tools": true, "toolConfig": true, "safetySettings": true,
	"generationConfig": true, "cachedContent": true, "serviceTier": true,
}

var vertexOnlyFields = map[string]bool{"labels": true, "modelArmorConfig": true}

func unknownName(name string) string {
	return "Invalid JSON payload received. Unknown name " + strconv.Quote(name) + ": Cannot find field."
}

// serveGenerate answers generateContent and streamGenerateContent, and
// passes the embeddings methods to serveGoogleEmbeddings.
func serveGenerate(c *call, vertex bool) {
	_, method, _ := geminiTarget(strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(c.r.URL.Path, geminiPrefix), vertexPrefix), "/v1/"), vertex)
	if method != "generateContent" && method != "streamGenerateContent" {
		serveGoogleEmbeddings(c, method, vertex)
		return
	}
	q, msg := checkGemini(c.body, vertex, c.model)
	if msg != "" {
		googleInvalid(c.w, msg)
		return
	}
	if c.scripted() {
		return
	}

	promptWords := 0
	q.systemInstruction.Get("parts").ForEach(func(_, p gjson.Result) bool {
		promptWords += c.s.promptTokens(p.Get("text").Str)
		return true
	})
	userText := ""
	var results []string
	for _, ct := range q.list {
		text, res := geminiContentText(ct)
		promptWords += c.s.promptTokens(text)
		for _, r := range res {
			promptWords += c.s.promptTokens(r)
		}
		if ct.Get("role").Str != "model" && text != "" {
			userText = text
		}
	}
	last := q.list[len(q.list)-1]
	userLast := last.Get("role").Str != "model"
	if userLast {
		if text, res := geminiContentText(last); text == "" {
			results = res
		}
	}
	var tools []string
	q.tools.ForEach(func(_, t gjson.Result) bool {
		t.Get("functionDeclarations").ForEach(func(_, d gjson.Result) bool {
			tools = append(tools, d.Get("name").Str)
			return true
		})
		return true
	})
	fcc := q.toolConfig.Get("functionCallingConfig")
	chosen := ""
	if names := fcc.Get("allowedFunctionNames").Array(); len(names) > 0 && fcc.Get("mode").Str == "ANY" {
		chosen = names[0].Str
	}
	gc := q.generationConfig
	a := decide(userText, strings.Join(results, " "), len(results) > 0, userLast, tools, chosen,
		fcc.Get("mode").Str == "NONE", gc.Get("maxOutputTokens").Int(), promptWords)
	if a.tool == "" && gc.Get("responseMimeType").Str == "application/json" {
		schema := gc.Get("responseJsonSchema")
		if !schema.Exists() {
			schema = gc.Get("responseSchema")
		}
		a.structured(schema, a.text())
	}
	g := geminiAnswer{answer: a, model: c.model, id: c.id, vertex: vertex, signs: signsThoughts(c.model)}
	if gc.Get("thinkingConfig.includeThoughts").Type == gjson.True {
		g.thought = "The user said: " + userText
	}
	if method == "streamGenerateContent" {
		g.stream(c)
		return
	}
	writeJSON(c.w, http.StatusOK, g.response(g.parts(), true))
}

// geminiContentText is a content's text (its text parts, thoughts left
// out, joined with spaces) and the text of each of its function responses:
// the response's "result" (or "output") when it has only that, else the
// response as JSON.
func geminiContentText(ct gjson.Result) (string, []string) {
	var texts, results []string
	ct.Get("parts").ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Type == gjson.String && p.Get("thought").Type != gjson.True && t.Str != "" {
			texts = append(texts, t.Str)
		}
		if fr := p.Get("functionResponse"); fr.Exists() {
			resp := fr.Get("response")
			text := resp.Raw
			if m := resp.Map(); len(m) == 1 {
				for _, k := range []string{"result", "output"} {
					if v, ok := m[k]; ok {
						text = v.Raw
						if v.Type == gjson.String {
							text = v.Str
						}
					}
				}
			}
			results = append(results, text)
		}
		return true
	})
	return strings.Join(texts, " "), results
}

// signsThoughts reports whether a model answers with thought signatures and
// validates them (Gemini 3 and later; here, a name containing "gemini-3").
func signsThoughts(model string) bool { return strings.Contains(model, "gemini-3") }

// geminiSigKey keys the fake's thought signatures.
var geminiSigKey = []byte("providertest thought signatures")

// thoughtSignature is the signature the fake gives a part: an HMAC of what
// the part says, so that it can tell its own signatures, returned exactly,
// from any other bytes. Standard base64, as Google's JSON has bytes.
func thoughtSignature(kind, name string, args []byte) string {
	m := hmac.New(sha256.New, geminiSigKey)
	m.Write([]byte(kind))
	m.Write([]byte{0})
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write(canonicalJSON(args))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// canonicalJSON re-encodes JSON with sorted keys and no spaces, so that a
// gateway may reformat a function call's arguments without changing its
// signature. Invalid JSON passes unchanged.
func canonicalJSON(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

// dummySignatures are the values Google documents for function calls whose
// signature was lost: they skip validation.
var dummySignatures = map[string]bool{"skip_thought_signature_validator": true, "context_engineering_is_the_way_to_go": true}

// geminiAnswer writes an answer in Gemini's shape.
type geminiAnswer struct {
	*answer
	model, id, thought string
	vertex, signs      bool
}

// parts returns the answer's parts: the thought summary, then the call or
// the text (signed on Gemini 3: a function call, and a text answer's last
// part).
func (g *geminiAnswer) parts() [][]byte {
	var parts [][]byte
	if g.thought != "" {
		parts = append(parts, append(appendString([]byte(`{"text":`), g.thought), `,"thought":true}`...))
	}
	if g.tool != "" {
		p := appendString([]byte(`{"functionCall":{"name":`), g.tool)
		p = append(p, `,"args":`...)
		p = append(p, g.toolArgs...)
		p = append(p, '}')
		if g.signs {
			p = append(p, `,"thoughtSignature":`...)
			p = appendString(p, thoughtSignature("call", g.tool, g.toolArgs))
		}
		return append(parts, append(p, '}'))
	}
	p := appendString([]byte(`{"text":`), g.text())
	if g.signs {
		p = append(p, `,"thoughtSignature":`...)
		p = appendString(p, thoughtSignature("text", g.text(), nil))
	}
	return append(parts, append(p, '}'))
}

// response is a GenerateContentResponse holding parts; final adds the
// finishReason and the whole usage.
func (g *geminiAnswer) response(parts [][]byte, final bool) []byte {
	b := make([]byte, 0, 512)
	b = append(b, `{"candidates":[{"content":{"parts":[`...)
	b = append(b, bytes.Join(parts, []byte{','})...)
	b = append(b, `],"role":"model"}`...)
	if final {
		b = append(b, `,"finishReason":"`...)
		if g.truncated {
			b = append(b, "MAX_TOKENS"...)
		} else {
			b = append(b, "STOP"...)
		}
		b = append(b, '"')
	}
	b = append(b, `,"index":0}],"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(g.promptTokens), 10)
	thoughts := countWords(g.thought)
	total := g.promptTokens
	if final {
		total += g.completionTokens() + thoughts
		b = append(b, `,"candidatesTokenCount":`...)
		b = strconv.AppendInt(b, int64(g.completionTokens()), 10)
	}
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if final && thoughts > 0 {
		b = append(b, `,"thoughtsTokenCount":`...)
		b = strconv.AppendInt(b, int64(thoughts), 10)
	}
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(g.promptTokens), 10)
	b = append(b, `}]`...)
	if g.vertex {
		b = append(b, `,"trafficType":"ON_DEMAND"`...)
	}
	b = append(b, `},"modelVersion":`...)
	b = appendString(b, g.model)
	if g.vertex {
		b = append(b, `,"createTime":"`...)
		b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"responseId":"fake-`...)
	b = append(b, g.id...)
	return append(b, `"}`...)
}

// geminiStreamError is what a midstream-error stream ends with: Google's
// error object, bare and pretty-printed across lines, not an SSE event (the
// SDKs read it by counting braces).
var geminiStreamError = []byte("{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded. Please try again later.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n")

// stream sends the answer as streamGenerateContent with alt=sse does: one
// GenerateContentResponse per event, "data: …\r\n\r\n", with the thought,
// then each word (or the function call), then an empty text part with the
// finishReason and the usage; no end marker. Without alt=sse the same
// responses come as one JSON array.
func (g *geminiAnswer) stream(c *call) {
	var events [][]byte
	if g.thought != "" {
		events = append(events, g.response([][]byte{append(appendString([]byte(`{"text":`), g.thought), `,"thought":true}`...)}, false))
	}
	if g.tool != "" {
		all := g.parts()
		events = append(events, g.response(all[len(all)-1:], false))
	} else {
		for i := range g.words {
			events = append(events, g.response([][]byte{append(appendString([]byte(`{"text":`), g.chunkWord(i)), '}')}, false))
		}
	}
	last := []byte(`{"text":""`)
	if g.signs && g.tool == "" {
		last = append(last, `,"thoughtSignature":`...)
		last = appendString(last, thoughtSignature("text", g.text(), nil))
	}
	events = append(events, g.response([][]byte{append(last, '}')}, true))

	if c.r.URL.Query().Get("alt") != "sse" {
		writeJSON(c.w, http.StatusOK, append(append([]byte("["), bytes.Join(events, []byte(",\r\n"))...), ']'))
		return
	}
	c.startSSE()
	first := 0 // the first content event: after the thought, if any
	if g.thought != "" {
		first = 1
	}
	for i, ev := range events {
		c.send(append(append([]byte("data: "), ev...), "\r\n\r\n"...))
		if i == first && i < len(events)-1 && c.afterFirstWord(geminiStreamError) {
			return
		}
	}
}

// checkGemini validates a GenerateContentRequest as strictly as the API
// and returns it parsed, or what is wrong with it in Google's words.
func checkGemini(body []byte, vertex bool, model string) (q geRequest, msg string) {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return q, "Invalid JSON payload received. Expected an object."
	}
	bad := readFields(gjson.ParseBytes(body), []field{
		{"contents", &q.contents}, {"systemInstruction", &q.systemInstruction}, {"tools", &q.tools},
		{"toolConfig", &q.toolConfig}, {"generationConfig", &q.generationConfig},
		{"safetySettings", &q.safetySettings}, {"serviceTier", &q.serviceTier},
	}, func(k string) bool { return !geminiFields[k] && !(vertex && vertexOnlyFields[k]) })
	if bad != "" {
		return q, unknownName(bad)
	}
	if !q.contents.IsArray() || len(q.contents.Array()) == 0 {
		return q, "* GenerateContentRequest.contents: contents is not specified"
	}
	q.list = q.contents.Array()
	if msg := checkGeminiContents(q.list, vertex); msg != "" {
		return q, msg
	}
	if signsThoughts(model) {
		if msg := checkSignatures(q.list); msg != "" {
			return q, msg
		}
	}
	if si := q.systemInstruction; si.Exists() {
		if msg := checkParts("system_instruction", si, "system", vertex); msg != "" {
			return q, msg
		}
	}
	names, msg := checkGeminiTools(q.tools, vertex)
	if msg != "" {
		return q, msg
	}
	if msg := checkToolConfig(q.toolConfig, names); msg != "" {
		return q, msg
	}
	if msg := checkGenerationConfig(q.generationConfig, vertex, model); msg != "" {
		return q, msg
	}
	if st := q.serviceTier; st.Exists() {
		switch strings.ToLower(st.Str) {
		case "standard", "flex", "priority", "unspecified":
		default:
			return q, "Invalid value at 'service_tier', " + strconv.Quote(st.String())
		}
	}
	q.safetySettings.ForEach(func(_, s gjson.Result) bool {
		if s.Get("category").Type != gjson.String || s.Get("threshold").Type != gjson.String {
			msg = "* GenerateContentRequest.safety_settings: each safety setting needs a category and a threshold"
		}
		return msg == ""
	})
	return q, msg
}

// checkGeminiContents checks every content and the pairing of function
// calls with their responses.
func checkGeminiContents(list []gjson.Result, vertex bool) string {
	calls := -1 // function calls of the previous content, -1 when it was not a model content with calls
	var callNames []string
	for i, ct := range list {
		p := "contents[" + strconv.Itoa(i) + "]"
		if !ct.IsObject() {
			return "Invalid value at '" + p + "' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content), expected an object"
		}
		role := ct.Get("role")
		switch {
		case role.Str == "user" || role.Str == "model":
		case !role.Exists() && !vertex:
		case !role.Exists():
			return "Please use a valid role: user, model."
		default:
			return "Please use a valid role: user, model."
		}
		if bad := readFields(ct, nil, func(k string) bool { return k != "role" && k != "parts" }); bad != "" {
			return unknownName(bad)
		}
		r := role.Str
		if r == "" {
			r = "user"
		}
		if msg := checkParts(p, ct, r, vertex); msg != "" {
			return msg
		}
		var fc, fr []string
		ct.Get("parts").ForEach(func(_, part gjson.Result) bool {
			if n := part.Get("functionCall.name"); n.Exists() {
				fc = append(fc, n.Str)
			}
			if n := part.Get("functionResponse.name"); n.Exists() {
				fr = append(fr, n.Str)
			}
			return true
		})
		if calls > 0 {
			if r != "user" || len(fr) != calls {
				return "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
			}
			for _, n := range fr {
				j := indexOf(callNames, n)
				if j < 0 {
					return "Please ensure that function response turn comes immediately after a function call turn, with a response for each call: no call of " + strconv.Quote(n)
				}
				callNames = append(callNames[:j], callNames[j+1:]...)
			}
		} else if len(fr) > 0 {
			return "Please ensure that function response turn comes immediately after a function call turn."
		}
		calls, callNames = -1, nil
		if r == "model" && len(fc) > 0 {
			calls, callNames = len(fc), fc
		}
	}
	if calls > 0 {
		return "Please ensure that function call turn comes immediately after a user turn or after a function response turn: the last function call turn has no responses."
	}
	return ""
}

// geminiPartData are the fields of a Part's data oneof.
var geminiPartData = map[string]bool{
	"text": true, "inlineData": true, "fileData": true, "functionCall": true, "functionResponse": true,
	"executableCode": true, "codeExecutionResult": true,
}

// geminiPartMeta are a Part's other fields.
var geminiPartMeta = map[string]bool{"thought": true, "thoughtSignature": true, "videoMetadata": true, "mediaResolution": true}

var functionName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$`)

// checkParts checks the parts of a content (or of systemInstruction, role
// "system") as the API does.
func checkParts(p string, ct gjson.Result, role string, vertex bool) string {
	parts := ct.Get("parts")
	if !parts.IsArray() || len(parts.Array()) == 0 {
		return "* GenerateContentRequest." + p + ".parts: contents.parts must not be empty."
	}
	for j, part := range parts.Array() {
		pp := p + ".parts[" + strconv.Itoa(j) + "]"
		if !part.IsObject() {
			return "Invalid value at '" + pp + "', expected an object"
		}
		data := ""
		var msg string
		part.ForEach(func(k, v gjson.Result) bool {
			switch {
			case geminiPartData[k.Str]:
				if data != "" {
					msg = "Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '" + k.Str + "'"
				}
				data = k.Str
			case geminiPartMeta[k.Str]:
			case k.Str == "partMetadata" && !vertex:
			default:
				msg = unknownName(k.Str)
			}
			return msg == ""
		})
		if msg != "" {
			return msg
		}
		if data == "" {
			return "* GenerateContentRequest." + pp + ".data: required oneof field 'data' must have one initialized field"
		}
		if t := part.Get("thought"); t.Exists() && t.Type != gjson.True && t.Type != gjson.False {
			return "Invalid value at '" + pp + ".thought' (TYPE_BOOL)"
		}
		sig := part.Get("thoughtSignature")
		if sig.Exists() && (sig.Type != gjson.String || !isBase64(sig.Str)) {
			return "Invalid value at '" + pp + ".thought_signature' (TYPE_BYTES), Base64 decoding failed for " + strconv.Quote(sig.String())
		}
		if role == "system" && data != "text" {
			return "* GenerateContentRequest.system_instruction: only text parts are supported"
		}
		v := part.Get(data)
		switch data {
		case "text":
			if v.Type != gjson.String {
				return "Invalid value at '" + pp + ".text' (TYPE_STRING)"
			}
			if v.Str == "" && !sig.Exists() {
				return "Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again."
			}
		case "inlineData":
			if v.Get("mimeType").Str == "" {
				return "* GenerateContentRequest." + pp + ".inline_data.mime_type: mime_type is required"
			}
			if d := v.Get("data"); d.Type != gjson.String || d.Str == "" || !isBase64(d.Str) {
				return "Invalid value at '" + pp + ".inline_data.data' (TYPE_BYTES), Base64 decoding failed"
			}
			if bad := readFields(v, nil, func(k string) bool { return k != "mimeType" && k != "data" && !(vertex && k == "displayName") }); bad != "" {
				return unknownName(bad)
			}
		case "fileData":
			if v.Get("fileUri").Str == "" {
				return "* GenerateContentRequest." + pp + ".file_data.file_uri: file_uri is required"
			}
			if vertex && v.Get("mimeType").Str == "" {
				return "* GenerateContentRequest." + pp + ".file_data.mime_type: mime_type is required"
			}
		case "functionCall":
			if role != "model" {
				return "Please ensure that function call turns are model turns: " + pp + " is in a " + role + " turn."
			}
			if !functionName.MatchString(v.Get("name").Str) {
				return "* GenerateContentRequest." + pp + ".function_call.name: Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 128."
			}
			if a := v.Get("args"); a.Exists() && !a.IsObject() {
				return "Invalid value at '" + pp + ".function_call.args' (type.googleapis.com/google.protobuf.Struct)"
			}
			if bad := readFields(v, nil, func(k string) bool { return k != "name" && k != "args" && k != "id" }); bad != "" {
				return unknownName(bad)
			}
		case "functionResponse":
			if role != "user" {
				return "Please ensure that function response turns are user turns: " + pp + " is in a " + role + " turn."
			}
			if !functionName.MatchString(v.Get("name").Str) {
				return "* GenerateContentRequest." + pp + ".function_response.name: Invalid function name."
			}
			if !v.Get("response").IsObject() {
				return "* GenerateContentRequest." + pp + ".function_response.response: response must be an object"
			}
			if bad := readFields(v, nil, func(k string) bool {
				return k != "name" && k != "response" && k != "id" && k != "parts" && k != "willContinue" && k != "scheduling"
			}); bad != "" {
				return unknownName(bad)
			}
		}
	}
	return ""
}

// isBase64 reports whether s is base64, standard or URL-safe, padded or
// not, as Google's JSON takes bytes.
func isBase64(s string) bool {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		_, err := base64.RawURLEncoding.DecodeString(s)
		return err == nil
	}
	_, err := base64.RawStdEncoding.DecodeString(s)
	return err == nil
}

// checkSignatures validates thought signatures as Gemini 3 does: in the
// current turn (the contents after the last user content with text or
// media), the first function call of every model content must carry the
// signature the model gave it, or one of Google's dummy values.
func checkSignatures(list []gjson.Result) string {
	start := 0
	for i := len(list) - 1; i >= 0; i-- {
		standard := false
		list[i].Get("parts").ForEach(func(_, p gjson.Result) bool {
			standard = !p.Get("functionResponse").Exists()
			return !standard
		})
		if list[i].Get("role").Str != "model" && standard {
			start = i + 1
			break
		}
	}
	for i := start; i < len(list); i++ {
		if list[i].Get("role").Str != "model" {
			continue
		}
		for _, p := range list[i].Get("parts").Array() {
			fc := p.Get("functionCall")
			if !fc.Exists() {
				continue
			}
			sig := p.Get("thoughtSignature").Str
			switch {
			case sig == "":
				return "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:" +
					fc.Get("name").Str + "` , position " + strconv.Itoa(i+1) + ". Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
			case dummySignatures[sig]:
			case sig != thoughtSignature("call", fc.Get("name").Str, []byte(fc.Get("args").Raw)):
				return "Corrupted thought signature."
			}
			break // only the first call of each step is signed
		}
	}
	return ""
}

// checkGeminiTools checks tools and returns the declared function names.
func checkGeminiTools(tools gjson.Result, vertex bool) ([]string, string) {
	if !tools.Exists() {
		return nil, ""
	}
	if !tools.IsArray() {
		return nil, "Invalid value at 'tools', expected a list"
	}
	var names []string
	for i, t := range tools.Array() {
		p := "tools[" + strconv.Itoa(i) + "]"
		msg := ""
		t.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "functionDeclarations":
				for j, d := range v.Array() {
					dp := p + ".function_declarations[" + strconv.Itoa(j) + "]"
					name := d.Get("name").Str
					if !functionName.MatchString(name) {
						msg = "* GenerateContentRequest." + dp + ".name: Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 128."
						return false
					}
					if indexOf(names, name) >= 0 {
						msg = "* GenerateContentRequest.tools: Duplicate function declaration found: " + name
						return false
					}
					names = append(names, name)
					if d.Get("parameters").Exists() && d.Get("parametersJsonSchema").Exists() {
						msg = "* GenerateContentRequest." + dp + ": parameters and parameters_json_schema are mutually exclusive"
						return false
					}
					if s := d.Get("parametersJsonSchema"); s.Exists() && (!s.IsObject() || s.Get("type").Str != "object") {
						msg = "* GenerateContentRequest." + dp + ".parameters_json_schema: the schema must describe an object (\"type\": \"object\")"
						return false
					}
					if bad := readFields(d, nil, func(k string) bool {
						switch k {
						case "name", "description", "parameters", "parametersJsonSchema", "response", "responseJsonSchema", "behavior":
							return false
						}
						return true
					}); bad != "" {
						msg = unknownName(bad)
						return false
					}
				}
			case "googleSearch", "googleSearchRetrieval", "codeExecution", "urlContext", "googleMaps", "computerUse":
			case "fileSearch", "mcpServers":
				if vertex {
					msg = unknownName(k.Str)
				}
			case "retrieval", "enterpriseWebSearch", "parallelAiSearch", "exaAiSearch":
				if !vertex {
					msg = unknownName(k.Str)
				}
			default:
				msg = unknownName(k.Str)
			}
			return msg == ""
		})
		if msg != "" {
			return nil, msg
		}
	}
	return names, ""
}

// checkToolConfig checks functionCallingConfig against the declarations.
func checkToolConfig(tc gjson.Result, names []string) string {
	if !tc.Exists() {
		return ""
	}
	if bad := readFields(tc, nil, func(k string) bool { return k != "functionCallingConfig" && k != "retrievalConfig" }); bad != "" {
		return unknownName(bad)
	}
	fcc := tc.Get("functionCallingConfig")
	mode := fcc.Get("mode").Str
	switch mode {
	case "", "MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED":
	default:
		return "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), " + strconv.Quote(mode)
	}
	allowed := fcc.Get("allowedFunctionNames")
	if allowed.Exists() {
		if mode != "ANY" && mode != "VALIDATED" {
			return "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names should only be set when the mode is ANY or VALIDATED."
		}
		for _, n := range allowed.Array() {
			if indexOf(names, n.Str) < 0 {
				return "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: function " + strconv.Quote(n.Str) + " is not declared."
			}
		}
	}
	if mode == "ANY" && len(names) == 0 {
		return "* GenerateContentRequest.tool_config.function_calling_config.mode: function calling mode ANY needs function declarations."
	}
	return ""
}

// checkGenerationConfig checks generationConfig's fields, their types and
// ranges.
func checkGenerationConfig(gc gjson.Result, vertex bool, model string) string {
	if !gc.Exists() {
		return ""
	}
	if !gc.IsObject() {
		return "Invalid value at 'generation_config', expected an object"
	}
	number := func(v gjson.Result, name string, lo, hi float64) string {
		if v.Type != gjson.Number || v.Num < lo || v.Num > hi {
			return "* GenerateContentRequest.generation_config." + name + ": must be a number from " +
				strconv.FormatFloat(lo, 'g', -1, 64) + " to " + strconv.FormatFloat(hi, 'g', -1, 64)
		}
		return ""
	}
	integer := func(v gjson.Result, name string, lo, hi int64) string {
		if !isInt(v, lo) || v.Int() > hi {
			return "Invalid value at 'generation_config." + name + "' (TYPE_INT32), " + strconv.Quote(v.Raw)
		}
		return ""
	}
	msg := ""
	var hasSchema, hasJSONSchema bool
	gc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "temperature":
			msg = number(v, "temperature", 0, 2)
		case "topP":
			msg = number(v, "top_p", 0, 1)
		case "topK":
			msg = integer(v, "top_k", 1, 1<<31-1)
		case "candidateCount":
			msg = integer(v, "candidate_count", 1, 8)
		case "maxOutputTokens":
			msg = integer(v, "max_output_tokens", 1, 1<<31-1)
		case "seed":
			msg = integer(v, "seed", -1<<31, 1<<31-1)
		case "presencePenalty", "frequencyPenalty":
			msg = number(v, k.Str, -2, 2)
		case "stopSequences":
			if !v.IsArray() || len(v.Array()) > 5 {
				msg = "* GenerateContentRequest.generation_config.stop_sequences: at most 5 stop sequences"
			}
			v.ForEach(func(_, s gjson.Result) bool {
				if s.Type != gjson.String {
					msg = "Invalid value at 'generation_config.stop_sequences' (TYPE_STRING)"
				}
				return msg == ""
			})
		case "responseMimeType":
			switch v.Str {
			case "text/plain", "application/json", "text/x.enum":
			default:
				msg = "* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are `text/plain`, `application/json` and `text/x.enum`."
			}
		case "responseSchema":
			hasSchema = true
			if !v.IsObject() {
				msg = "Invalid value at 'generation_config.response_schema', expected an object"
			}
		case "responseJsonSchema":
			hasJSONSchema = true
		case "responseLogprobs":
			if v.Type != gjson.True && v.Type != gjson.False {
				msg = "Invalid value at 'generation_config.response_logprobs' (TYPE_BOOL)"
			}
		case "logprobs":
			msg = integer(v, "logprobs", 0, 20)
			if msg == "" && gc.Get("responseLogprobs").Type != gjson.True {
				msg = "* GenerateContentRequest.generation_config.logprobs: logprobs is only valid if response_logprobs is true."
			}
		case "thinkingConfig":
			msg = checkThinkingConfig(v, model)
		case "responseModalities", "mediaResolution", "speechConfig", "imageConfig":
		case "enableEnhancedCivicAnswers":
			if vertex {
				msg = unknownName(k.Str)
			}
		case "audioTimestamp", "routingConfig", "modelConfig":
			if !vertex {
				msg = unknownName(k.Str)
			}
		default:
			msg = unknownName(k.Str)
		}
		return msg == ""
	})
	if msg != "" {
		return msg
	}
	if hasSchema && hasJSONSchema {
		return "* GenerateContentRequest.generation_config: response_schema and response_json_schema are mutually exclusive."
	}
	if (hasSchema || hasJSONSchema) && gc.Get("responseMimeType").Str != "application/json" && gc.Get("responseMimeType").Str != "text/x.enum" {
		return "* GenerateContentRequest.generation_config.response_mime_type: When using a response schema, response_mime_type must be application/json."
	}
	return ""
}

// checkThinkingConfig checks a thinkingConfig: a budget or a level, not
// both; levels only on models that take them (Gemini 3), and LOW or HIGH
// only on Gemini 3 Pro.
func checkThinkingConfig(tc gjson.Result, model string) string {
	if bad := readFields(tc, nil, func(k string) bool {
		return k != "includeThoughts" && k != "thinkingBudget" && k != "thinkingLevel"
	}); bad != "" {
		return unknownName(bad)
	}
	if it := tc.Get("includeThoughts"); it.Exists() && it.Type != gjson.True && it.Type != gjson.False {
		return "Invalid value at 'generation_config.thinking_config.include_thoughts' (TYPE_BOOL)"
	}
	level, budget := tc.Get("thinkingLevel"), tc.Get("thinkingBudget")
	if level.Exists() && budget.Exists() {
		return "You can only set only one of thinking budget and thinking level."
	}
	if budget.Exists() && !isInt(budget, -1) {
		return "Invalid value at 'generation_config.thinking_config.thinking_budget' (TYPE_INT32)"
	}
	if level.Exists() {
		switch level.Str {
		case "MINIMAL", "LOW", "MEDIUM", "HIGH":
		default:
			return "Invalid value at 'generation_config.thinking_config.thinking_level', " + strconv.Quote(level.String())
		}
		if strings.Contains(model, "gemini-2") || strings.Contains(model, "gemini-1") {
			return "Thinking level is not supported for this model."
		}
		if strings.Contains(model, "gemini-3-pro") && (level.Str == "MINIMAL" || level.Str == "MEDIUM") {
			return "Thinking level " + level.Str + " is not supported for this model. Please retry with other thinking level"
		}
	}
	return ""
}
