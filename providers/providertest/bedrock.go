package providertest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"
)

// bedrockFormat is Amazon Bedrock's Converse API (as aws-sdk-go-v2's
// service/bedrockruntime sends it): POST /model/{modelId}/converse and POST
// /model/{modelId}/converse-stream, the model id escaped in the path (ARNs
// hold ':' and '/'), and InvokeModel (POST /model/{modelId}/invoke) for the
// Titan and Cohere embeddings models (see serveBedrockInvoke). Requests are
// signed with AWS SigV4 (service "bedrock"); with a key configured ("<access
// key id>:<secret access key>", or with ":<session token>" after it) the fake
// recomputes the signature with aws-sdk-go-v2's v4 signer from the request as
// it arrived (method, escaped path, query, the signed headers, the host and
// the body's SHA-256), so a test proves the gateway signed the final request.
// Bedrock API keys come as "Authorization: Bearer <key>" instead (see
// bedrockAPIKey). Errors are AWS's: the type in x-amzn-ErrorType, {"message":
// …} in the body. Streams are AWS event-stream messages (application/
// vnd.amazon.eventstream), written with the SDK's Encoder.
//
// Beyond the answer every format derives, a request that turns on
// reasoning (additionalModelRequestFields.thinking, reasoningConfig or
// reasoning_effort) gets a reasoningContent block first, signed by the
// fake; a signed reasoning block sent back must carry that exact text and
// signature, and with thinking on, a final assistant turn with tool calls
// must start with its reasoning, as Claude requires. outputConfig's JSON
// schema, or a tool the toolChoice forces, makes the answer structured
// (a schema instance, as answer.structured makes).
type bedrockFormat struct{}

const (
	bedrockPrefix = "/model/"
	// bedrockService is SigV4's service name for the Bedrock runtime.
	bedrockService = "bedrock"
	// bedrockThinkingKey signs the fake's reasoning blocks.
	bedrockThinkingKey = "providertest bedrock thinking"
)

func (bedrockFormat) name() string { return "bedrock" }

// route splits the escaped path: /model/<escaped id>/converse[-stream].
func (bedrockFormat) route(r *http.Request) routing {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), bedrockPrefix)
	if !ok {
		return notMine
	}
	model, op, _ := strings.Cut(rest, "/")
	switch op {
	case "converse", "converse-stream", "invoke", "invoke-with-response-stream":
	default:
		return owned
	}
	if model == "" || r.Method != http.MethodPost {
		return owned
	}
	return served
}

func (bedrockFormat) headers(h http.Header, id string) {
	h.Set("X-Amzn-Requestid", "f00dcafe-0000-4000-8000-"+strings.Repeat("0", max(0, 12-len(id)))+id)
}

// model is the path's model id, unescaped.
func (bedrockFormat) model(r *http.Request, _ []byte) string {
	rest, _ := strings.CutPrefix(r.URL.EscapedPath(), bedrockPrefix)
	seg, _, _ := strings.Cut(rest, "/")
	m, err := url.PathUnescape(seg)
	if err != nil {
		return seg
	}
	return m
}

// sigV4 is a parsed SigV4 Authorization header.
type sigV4 struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

// parseSigV4 reads "AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/
// <service>/aws4_request, SignedHeaders=a;b, Signature=<hex>".
func parseSigV4(h string) (sigV4, bool) {
	var s sigV4
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return s, false
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return s, false
			}
			s.accessKey, s.date, s.region, s.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			s.signedHeaders = strings.Split(v, ";")
		case "Signature":
			s.signature = v
		}
	}
	return s, s.accessKey != "" && s.region != "" && len(s.signedHeaders) > 0 && len(s.signature) == 64
}

// bedrockKey splits a configured key: access key id, secret, session token.
func bedrockKey(want string) (id, secret, token string) {
	id, rest, _ := strings.Cut(want, ":")
	secret, token, _ = strings.Cut(rest, ":")
	return id, secret, token
}

// authorized checks the signature's form and access key; serve, which has
// the body, checks the signature itself. A Bedrock API key ("Authorization:
// Bearer <key>") passes here and is checked by serve too (see
// bedrockAPIKey).
func (bedrockFormat) authorized(r *http.Request, want string) bool {
	if bearer(r) != "" {
		return true
	}
	s, ok := parseSigV4(r.Header.Get("Authorization"))
	if !ok || r.Header.Get("X-Amz-Date") == "" {
		return false
	}
	id, _, _ := bedrockKey(want)
	return keyOK(s.accessKey, id)
}

// verifySigV4 recomputes the request's signature with the SDK's signer and
// returns what is wrong, or "".
func verifySigV4(r *http.Request, body []byte, want string) string {
	s, _ := parseSigV4(r.Header.Get("Authorization"))
	id, secret, token := bedrockKey(want)
	if s.service != bedrockService {
		return "Credential should be scoped to correct service: '" + bedrockService + "'."
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != s.date {
		return "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '" + s.date + "'."
	}
	if d := time.Since(at); d > 15*time.Minute || d < -15*time.Minute {
		return "Signature expired: " + r.Header.Get("X-Amz-Date") + " is now earlier or later than 15 min from now."
	}
	if got := r.Header.Get("X-Amz-Security-Token"); got != token {
		return "The security token included in the request is invalid."
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return "The provided 'x-amz-content-sha256' header does not match what was computed."
	}

	// The request as the signer saw it: the same method, escaped path,
	// query and host, only the headers the signature names, and the body.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	re, err := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return "the request URL cannot be rebuilt"
	}
	re.Host = r.Host
	re.URL.RawPath, re.URL.Path, re.URL.RawQuery = r.URL.RawPath, r.URL.Path, r.URL.RawQuery
	re.ContentLength = 0
	for _, name := range s.signedHeaders {
		switch name {
		case "host":
		case "content-length":
			if r.ContentLength != int64(len(body)) {
				return "the signed content-length does not match the body"
			}
			re.ContentLength = int64(len(body))
		default:
			k := http.CanonicalHeaderKey(name)
			if v, ok := r.Header[k]; ok {
				re.Header[k] = v
			}
		}
	}
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, payloadHash, s.service, s.region, at); err != nil {
		return "the signature cannot be recomputed: " + err.Error()
	}
	if re.Header.Get("Authorization") != r.Header.Get("Authorization") {
		return "The request signature we calculated does not match the signature you provided. " +
			"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
	}
	return ""
}

func (bedrockFormat) fail(w http.ResponseWriter, r *http.Request, f fault) {
	status, typ, msg := f.status(), "", ""
	switch f {
	case notFound:
		typ, msg = "UnknownOperationException", "Unknown operation: "+r.Method+" "+r.URL.EscapedPath()
	case tooLarge:
		typ, msg = "ValidationException", "Request body is too large: "+msgTooLarge
	case unreadable:
		typ, msg = "SerializationException", msgUnreadable
	case unauthorized:
		// AWS answers every authentication failure with a 403.
		status, typ, msg = http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
		if r.Header.Get("Authorization") == "" {
			typ, msg = "MissingAuthenticationTokenException", "Missing Authentication Token"
		}
	case rateLimited:
		typ, msg = "ThrottlingException", "Too many requests, please wait before trying again."
	case serverError:
		typ, msg = "InternalServerException", "The server encountered an internal error while processing the request."
	case overloaded:
		typ, msg = "ServiceUnavailableException", "Bedrock is unable to process your request."
	}
	bedrockError(w, status, typ, msg)
}

// bedrockError writes an AWS error answer: the type in x-amzn-ErrorType,
// the message in the body.
func bedrockError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, status, append(appendString([]byte(`{"message":`), msg), '}'))
}

// cvRequest is a Converse request's top-level fields, read in one pass.
type cvRequest struct {
	messages, system, inferenceConfig, toolConfig, additional gjson.Result
	outputConfig, serviceTier, requestMetadata, performance   gjson.Result
	msgs                                                      []gjson.Result
	thinking                                                  bool // reasoning asked for
	claudeThinking                                            bool // additionalModelRequestFields.thinking enabled or adaptive
}

// converseFields are the body members Converse takes; the model id is in
// the path only.
var converseFields = map[string]bool{
	"messages": true, "system": true, "inferenceConfig": true, "toolConfig": true, "guardrailConfig": true,
	"additionalModelRequestFields": true, "promptVariables": true, "additionalModelResponseFieldPaths": true,
	"requestMetadata": true, "performanceConfig": true, "serviceTier": true, "outputConfig": true,
}

// bedrockAPIKey is the name in Options.Keys of the Bedrock API key the
// fake takes as "Authorization: Bearer <key>" (Bedrock's API keys, which
// the AWS SDKs send from AWS_BEARER_TOKEN_BEDROCK instead of signing). With
// it unset, a fake that checks signatures (Keys["bedrock"] set) refuses
// bearer keys, and one that does not takes any.
const bedrockAPIKey = "bedrock_api_key"

// bedrockAuth checks a request's credentials: its API key, or its
// signature recomputed over the body when a key is configured. It answers
// a failure itself and reports whether the request may go on.
func bedrockAuth(c *call) bool {
	if token := bearer(c.r); token != "" {
		want, named := c.s.opts.Keys[bedrockAPIKey]
		if named && !keyOK(token, want) || !named && c.s.opts.key(c.f) != "" {
			bedrockError(c.w, http.StatusForbidden, "UnrecognizedClientException", "Authentication failed: the API key is not valid.")
			return false
		}
		return true
	}
	if want := c.s.opts.key(c.f); want != "" {
		if msg := verifySigV4(c.r, c.body, want); msg != "" {
			typ := "InvalidSignatureException"
			if strings.HasPrefix(msg, "The security token") {
				typ = "UnrecognizedClientException"
			}
			bedrockError(c.w, http.StatusForbidden, typ, msg)
			return false
		}
	}
	return true
}

func (bedrockFormat) serve(c *call) {
	if !bedrockAuth(c) {
		return
	}
	if ct := c.r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		bedrockError(c.w, http.StatusBadRequest, "SerializationException", "Content-Type must be application/json, not "+strconv.Quote(ct))
		return
	}
	if path := c.r.URL.EscapedPath(); strings.HasSuffix(path, "/invoke") || strings.HasSuffix(path, "/invoke-with-response-stream") {
		stream := strings.HasSuffix(path, "/invoke-with-response-stream")
		if isBedrockClaude(c.model) {
			serveBedrockMessages(c, stream)
			return
		}
		if stream {
			bedrockError(c.w, http.StatusBadRequest, "ValidationException", "The fake streams InvokeModel for Anthropic's models only.")
			return
		}
		serveBedrockInvoke(c)
		return
	}
	q, msg := checkConverse(c.body)
	if msg != "" {
		bedrockError(c.w, http.StatusBadRequest, "ValidationException", msg)
		return
	}
	if c.scripted() {
		return
	}

	promptWords := 0
	for _, b := range q.system.Array() {
		promptWords += c.s.promptTokens(b.Get("text").Str)
	}
	userText := ""
	for _, m := range q.msgs {
		text := bedrockText(m.Get("content"))
		promptWords += c.s.promptTokens(text)
		for _, b := range m.Get("content").Array() {
			promptWords += c.s.promptTokens(bedrockText(b.Get("toolResult.content")))
		}
		if m.Get("role").Str == "user" && text != "" {
			userText = text
		}
	}
	last := q.msgs[len(q.msgs)-1]
	userLast := last.Get("role").Str == "user"
	var results []string
	if userLast && bedrockText(last.Get("content")) == "" {
		for _, b := range last.Get("content").Array() {
			if tr := b.Get("toolResult"); tr.Exists() {
				results = append(results, bedrockText(tr.Get("content")))
			}
		}
	}
	var tools []string
	schemas := map[string]gjson.Result{}
	for _, t := range q.toolConfig.Get("tools").Array() {
		if spec := t.Get("toolSpec"); spec.Exists() {
			tools = append(tools, spec.Get("name").Str)
			schemas[spec.Get("name").Str] = spec.Get("inputSchema.json")
		}
	}
	forced := q.toolConfig.Get("toolChoice.tool.name").Str
	a := decide(userText, strings.Join(results, " "), len(results) > 0, userLast, tools, forced, false,
		q.inferenceConfig.Get("maxTokens").Int(), promptWords)
	switch {
	case a.tool != "" && forced != "":
		// A forced tool is asked for as structured output: its input is
		// an instance of the tool's schema.
		a.toolArgs = SchemaInstance(schemas[forced].Raw, "echo: "+userText)
	case a.tool == "" && q.outputConfig.Get("textFormat.type").Str == "json_schema":
		a.structured(gjson.Parse(q.outputConfig.Get("textFormat.structure.jsonSchema.schema").Str), a.text())
	}
	var reasoning string
	if q.thinking {
		reasoning = "thinking about: " + userText
		if len(results) > 0 {
			reasoning = "thinking about the tool results: " + strings.Join(results, " ")
		}
	}

	if strings.HasSuffix(c.r.URL.EscapedPath(), "/converse-stream") {
		streamBedrock(c, a, reasoning)
		return
	}
	b := make([]byte, 0, 512)
	b = append(b, `{"output":{"message":{"role":"assistant","content":[`...)
	if reasoning != "" {
		b = append(b, `{"reasoningContent":{"reasoningText":{"text":`...)
		b = appendString(b, reasoning)
		b = append(b, `,"signature":`...)
		b = appendString(b, bedrockSignature(reasoning))
		b = append(b, `}}},`...)
	}
	if a.tool != "" {
		b = append(b, `{"toolUse":{"toolUseId":"tooluse_`...)
		b = append(b, c.id...)
		b = append(b, `","name":`...)
		b = appendString(b, a.tool)
		b = append(b, `,"input":`...)
		b = append(b, a.toolArgs...)
		b = append(b, "}}"...)
	} else {
		b = append(b, `{"text":`...)
		b = appendString(b, a.text())
		b = append(b, '}')
	}
	b = append(b, `]}},"stopReason":"`...)
	b = append(b, bedrockStop(a)...)
	b = append(b, `","usage":`...)
	b = appendBedrockUsage(b, a, reasoning)
	b = append(b, `,"metrics":{"latencyMs":42}}`...)
	writeJSON(c.w, http.StatusOK, b)
}

// bedrockSignature is the signature the fake gives its reasoning text.
func bedrockSignature(text string) string {
	m := hmac.New(sha256.New, []byte(bedrockThinkingKey))
	m.Write([]byte(text))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func bedrockStop(a *answer) string {
	switch {
	case a.tool != "":
		return "tool_use"
	case a.truncated:
		return "max_tokens"
	}
	return "end_turn"
}

// appendBedrockUsage appends Converse's usage; reasoning counts as output.
func appendBedrockUsage(b []byte, a *answer, reasoning string) []byte {
	out := a.completionTokens() + countWords(reasoning)
	b = append(b, `{"inputTokens":`...)
	b = strconv.AppendInt(b, int64(a.promptTokens), 10)
	b = append(b, `,"outputTokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, int64(a.promptTokens+out), 10)
	return append(b, '}')
}

// bedrockText is the text of a content (or tool result content) array:
// its text blocks, and json blocks as JSON text, joined with spaces.
func bedrockText(content gjson.Result) string {
	var parts []string
	for _, b := range content.Array() {
		if t := b.Get("text"); t.Type == gjson.String {
			parts = append(parts, t.Str)
		} else if j := b.Get("json"); j.Exists() {
			parts = append(parts, j.Raw)
		}
	}
	return strings.Join(parts, " ")
}

// streamBedrock sends the answer as ConverseStream event-stream messages,
// flushing after each.
func streamBedrock(c *call, a *answer, reasoning string) {
	c.w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	c.w.WriteHeader(http.StatusOK)
	enc := eventstream.NewEncoder()
	var buf bytes.Buffer
	event := func(typ string, payload []byte) {
		buf.Reset()
		_ = enc.Encode(&buf, eventstream.Message{
			Headers: eventstream.Headers{
				{Name: ":event-type", Value: eventstream.StringValue(typ)},
				{Name: ":content-type", Value: eventstream.StringValue("application/json")},
				{Name: ":message-type", Value: eventstream.StringValue("event")},
			},
			Payload: payload,
		})
		c.send(buf.Bytes())
	}
	errEvent := bedrockStreamError()
	block := 0
	delta := func(d []byte) {
		p := append([]byte(`{"contentBlockIndex":`), strconv.Itoa(block)...)
		p = append(p, `,"delta":`...)
		p = append(p, d...)
		event("contentBlockDelta", append(p, `,"p":"abcdefghijklmnopqrstuvwxyz"}`...))
	}
	stop := func() {
		event("contentBlockStop", []byte(`{"contentBlockIndex":`+strconv.Itoa(block)+`,"p":"abcdefgh"}`))
		block++
	}

	event("messageStart", []byte(`{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGH","role":"assistant"}`))
	if reasoning != "" {
		words := strings.Fields(reasoning)
		for i, w := range words {
			if i > 0 {
				w = " " + w
			}
			delta(append(appendString([]byte(`{"reasoningContent":{"text":`), w), "}}"...))
		}
		delta(append(appendString([]byte(`{"reasoningContent":{"signature":`), bedrockSignature(reasoning)), "}}"...))
		stop()
	}
	if a.tool != "" {
		start := []byte(`{"contentBlockIndex":` + strconv.Itoa(block) + `,"p":"abcdefghijklmnopq","start":{"toolUse":{"name":`)
		start = appendString(start, a.tool)
		start = append(start, `,"toolUseId":"tooluse_`+c.id+`"}}}`...)
		event("contentBlockStart", start)
		for i, f := range a.argFragments() {
			delta(append(appendString([]byte(`{"toolUse":{"input":`), f), "}}"...))
			if i == 0 && c.afterFirstWord(errEvent) {
				return
			}
		}
	} else {
		for i := range a.words {
			delta(append(appendString([]byte(`{"text":`), a.chunkWord(i)), '}'))
			if i == 0 && c.afterFirstWord(errEvent) {
				return
			}
		}
	}
	stop()
	event("messageStop", []byte(`{"p":"abcdefghijklmnop","stopReason":"`+bedrockStop(a)+`"}`))
	md := append([]byte(`{"metrics":{"latencyMs":42},"p":"abcdefghijkl","usage":`), appendBedrockUsage(nil, a, reasoning)...)
	event("metadata", append(md, '}'))
}

// bedrockStreamError is the exception message a midstream-error stream ends
// with.
func bedrockStreamError() []byte {
	var buf bytes.Buffer
	_ = eventstream.NewEncoder().Encode(&buf, eventstream.Message{
		Headers: eventstream.Headers{
			{Name: ":exception-type", Value: eventstream.StringValue("modelStreamErrorException")},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("exception")},
		},
		Payload: []byte(`{"message":"The model's stream failed.","originalStatusCode":500}`),
	})
	return buf.Bytes()
}

// checkConverse validates a Converse request as strictly as Bedrock and
// returns it parsed, or what is wrong with it (a ValidationException).
func checkConverse(body []byte) (q cvRequest, msg string) {
	if !validJSON(body) || !gjson.ParseBytes(body).IsObject() {
		return q, "Unable to parse request body: not a JSON object"
	}
	var guardrail, promptVars, paths gjson.Result
	bad := readFields(gjson.ParseBytes(body), []field{
		{"messages", &q.messages}, {"system", &q.system}, {"inferenceConfig", &q.inferenceConfig},
		{"toolConfig", &q.toolConfig}, {"additionalModelRequestFields", &q.additional},
		{"outputConfig", &q.outputConfig}, {"serviceTier", &q.serviceTier}, {"requestMetadata", &q.requestMetadata},
		{"performanceConfig", &q.performance}, {"guardrailConfig", &guardrail}, {"promptVariables", &promptVars},
		{"additionalModelResponseFieldPaths", &paths},
	}, func(k string) bool { return !converseFields[k] })
	if bad != "" {
		return q, "Unable to parse request body: extraneous key [" + bad + "] is not permitted"
	}
	if msg := checkConverseConfig(&q); msg != "" {
		return q, msg
	}
	if msg := checkConverseSystem(q.system); msg != "" {
		return q, msg
	}
	tools, msg := checkConverseTools(q.toolConfig)
	if msg != "" {
		return q, msg
	}
	if msg := checkConverseMessages(&q, tools); msg != "" {
		return q, msg
	}
	return q, ""
}

// checkConverseConfig checks inferenceConfig, additionalModelRequestFields,
// outputConfig, serviceTier, requestMetadata and performanceConfig.
func checkConverseConfig(q *cvRequest) string {
	ic := q.inferenceConfig
	if ic.Exists() && !ic.IsObject() {
		return "inferenceConfig must be an object"
	}
	var msg string
	ic.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "maxTokens":
			if !isInt(v, 1) {
				msg = "inferenceConfig.maxTokens must be an integer of at least 1"
			}
		case "temperature", "topP":
			if v.Type != gjson.Number || v.Num < 0 || v.Num > 1 {
				msg = "inferenceConfig." + k.Str + " must be a number between 0 and 1"
			}
		case "stopSequences":
			if !v.IsArray() {
				msg = "inferenceConfig.stopSequences must be an array of strings"
			}
			for _, s := range v.Array() {
				if s.Type != gjson.String || s.Str == "" {
					msg = "inferenceConfig.stopSequences must hold non-empty strings"
				}
			}
		default:
			msg = "Unable to parse request body: extraneous key [" + k.Str + "] is not permitted in inferenceConfig"
		}
		return msg == ""
	})
	if msg != "" {
		return msg
	}

	add := q.additional
	if add.Exists() && !add.IsObject() {
		return "additionalModelRequestFields must be a JSON object"
	}
	if th := add.Get("thinking"); th.Exists() {
		switch th.Get("type").Str {
		case "enabled":
			budget := th.Get("budget_tokens")
			if !isInt(budget, 1024) {
				return "The model returned the following errors: thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
			}
			if mt := ic.Get("maxTokens"); !mt.Exists() || mt.Int() <= budget.Int() {
				return "The model returned the following errors: `max_tokens` must be greater than `thinking.budget_tokens`"
			}
			q.thinking, q.claudeThinking = true, true
		case "adaptive":
			q.thinking, q.claudeThinking = true, true
		case "disabled":
		default:
			return "The model returned the following errors: thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'"
		}
		if t := ic.Get("temperature"); q.claudeThinking && t.Exists() && t.Num != 1 {
			return "The model returned the following errors: `temperature` may only be set to 1 when thinking is enabled"
		}
	}
	if rc := add.Get("reasoningConfig"); rc.Exists() {
		if rc.Get("type").Str != "enabled" && rc.Get("type").Str != "disabled" {
			return "reasoningConfig.type must be enabled or disabled"
		}
		if e := rc.Get("maxReasoningEffort").Str; rc.Get("type").Str == "enabled" && e != "low" && e != "medium" && e != "high" {
			return "reasoningConfig.maxReasoningEffort must be low, medium or high"
		}
		q.thinking = q.thinking || rc.Get("type").Str == "enabled"
	}
	if re := add.Get("reasoning_effort"); re.Exists() {
		if re.Str != "low" && re.Str != "medium" && re.Str != "high" {
			return "reasoning_effort must be low, medium or high"
		}
		q.thinking = true
	}

	oc := q.outputConfig
	if oc.Exists() && !oc.IsObject() {
		return "outputConfig must be an object"
	}
	oc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "effort":
			switch v.Str {
			case "low", "medium", "high", "xhigh", "max":
			default:
				msg = "outputConfig.effort must be low, medium, high, xhigh or max"
			}
		case "textFormat":
			js := v.Get("structure.jsonSchema")
			schema := js.Get("schema")
			switch {
			case v.Get("type").Str != "json_schema":
				msg = "outputConfig.textFormat.type must be json_schema"
			case schema.Type != gjson.String:
				msg = "outputConfig.textFormat.structure.jsonSchema.schema must be a string holding a JSON schema"
			case !gjson.Valid(schema.Str) || !gjson.Parse(schema.Str).IsObject():
				msg = "outputConfig.textFormat.structure.jsonSchema.schema is not a valid JSON schema"
			case js.Get("name").Exists() && js.Get("name").Type != gjson.String:
				msg = "outputConfig.textFormat.structure.jsonSchema.name must be a string"
			}
		default:
			msg = "Unable to parse request body: extraneous key [" + k.Str + "] is not permitted in outputConfig"
		}
		return msg == ""
	})
	if msg != "" {
		return msg
	}
	if st := q.serviceTier; st.Exists() {
		switch st.Get("type").Str {
		case "priority", "default", "flex", "reserved":
		default:
			return "serviceTier.type must be priority, default, flex or reserved"
		}
	}
	if pc := q.performance; pc.Exists() && pc.Get("latency").Str != "standard" && pc.Get("latency").Str != "optimized" {
		return "performanceConfig.latency must be standard or optimized"
	}
	if md := q.requestMetadata; md.Exists() {
		if !md.IsObject() {
			return "requestMetadata must be a map of strings"
		}
		n := 0
		md.ForEach(func(k, v gjson.Result) bool {
			n++
			if v.Type != gjson.String || !metadataValue(k.Str, 1) || !metadataValue(v.Str, 0) || n > 16 {
				msg = "requestMetadata: keys and values are up to 256 characters of [a-zA-Z0-9 :_@$#=/+,.-], at most 16 entries"
			}
			return msg == ""
		})
	}
	return msg
}

func metadataValue(s string, minLen int) bool {
	if len(s) < minLen || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(" \t\n\r:_@$#=/+,-.", c) >= 0) {
			return false
		}
	}
	return true
}

// checkConverseSystem checks the system blocks.
func checkConverseSystem(sys gjson.Result) string {
	if !sys.Exists() {
		return ""
	}
	if !sys.IsArray() {
		return "system must be an array of SystemContentBlock objects"
	}
	for i, b := range sys.Array() {
		p := "system." + strconv.Itoa(i)
		name, v, msg := unionMember(p, b)
		if msg != "" {
			return msg
		}
		switch name {
		case "text":
			if v.Type != gjson.String || strings.TrimSpace(v.Str) == "" {
				return "The text field in the SystemContentBlock object at " + p + " is blank. Add text to the text field, and try again."
			}
		case "cachePoint", "guardContent":
		default:
			return p + ": SystemContentBlock has no member " + strconv.Quote(name)
		}
	}
	return ""
}

// checkConverseTools checks toolConfig and returns the tools' names.
func checkConverseTools(tc gjson.Result) ([]string, string) {
	if !tc.Exists() {
		return nil, ""
	}
	tools := tc.Get("tools")
	if !tools.IsArray() || len(tools.Array()) == 0 {
		return nil, "toolConfig.tools must hold at least one tool"
	}
	var names []string
	for i, t := range tools.Array() {
		p := "toolConfig.tools." + strconv.Itoa(i)
		name, v, msg := unionMember(p, t)
		if msg != "" {
			return nil, msg
		}
		switch name {
		case "cachePoint":
			continue
		case "toolSpec":
		default:
			return nil, p + ": Tool has no member " + strconv.Quote(name)
		}
		n := v.Get("name").Str
		if !toolName(n) {
			return nil, p + ".toolSpec.name: must match [a-zA-Z0-9_-]{1,64}"
		}
		if indexOf(names, n) >= 0 {
			return nil, "The tool name " + n + " is used more than once in toolConfig.tools"
		}
		if d := v.Get("description"); d.Exists() && (d.Type != gjson.String || d.Str == "") {
			return nil, p + ".toolSpec.description must be a non-empty string"
		}
		if js := v.Get("inputSchema.json"); !js.IsObject() || js.Get("type").Str != "object" {
			return nil, p + ".toolSpec.inputSchema.json must be a JSON schema of type object"
		}
		var extra string
		v.ForEach(func(k, _ gjson.Result) bool {
			switch k.Str {
			case "name", "description", "inputSchema", "strict":
			default:
				extra = k.Str
			}
			return extra == ""
		})
		if extra != "" {
			return nil, "Unable to parse request body: extraneous key [" + extra + "] is not permitted in " + p + ".toolSpec"
		}
		names = append(names, n)
	}
	if choice := tc.Get("toolChoice"); choice.Exists() {
		name, v, msg := unionMember("toolConfig.toolChoice", choice)
		if msg != "" {
			return nil, msg
		}
		switch name {
		case "auto", "any":
		case "tool":
			if indexOf(names, v.Get("name").Str) < 0 {
				return nil, "toolConfig.toolChoice.tool.name: tool " + strconv.Quote(v.Get("name").Str) + " is not among the tools"
			}
		default:
			return nil, "toolConfig.toolChoice has no member " + strconv.Quote(name) + " (auto, any or tool)"
		}
	}
	return names, ""
}

func toolName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// unionMember returns the one member of a union object (a content block,
// a tool, a tool choice).
func unionMember(p string, v gjson.Result) (name string, member gjson.Result, msg string) {
	if !v.IsObject() {
		return "", member, p + " must be an object"
	}
	n := 0
	v.ForEach(func(k, val gjson.Result) bool {
		n++
		name, member = k.Str, val
		return true
	})
	if n != 1 {
		return "", member, p + " must have exactly one member set (it is a union), not " + strconv.Itoa(n)
	}
	return name, member, ""
}

// checkConverseMessages checks the conversation: alternating roles from a
// user turn, non-empty turns of known blocks in their roles, every toolUse
// answered by a toolResult in the next turn and no other, a toolConfig
// when tool blocks appear, the fake's own reasoning signatures, and, with
// Claude's thinking on, a final assistant turn with tool calls that starts
// with its reasoning.
func checkConverseMessages(q *cvRequest, tools []string) string {
	if !q.messages.IsArray() || len(q.messages.Array()) == 0 {
		return "The messages field must hold at least one message"
	}
	q.msgs = q.messages.Array()
	toolBlocks := false
	var uses []string // toolUse ids of the previous (assistant) turn
	lastToolTurn := -1
	for i, m := range q.msgs {
		p := "messages." + strconv.Itoa(i)
		role := m.Get("role").Str
		if !m.IsObject() || (role != "user" && role != "assistant") {
			return p + ".role must be user or assistant"
		}
		if i == 0 && role != "user" {
			return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
		}
		if i > 0 && q.msgs[i-1].Get("role").Str == role {
			return "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
		}
		content := m.Get("content")
		if !content.IsArray() || len(content.Array()) == 0 {
			return "The content field in the Message object at " + p + " is empty. Add a ContentBlock object to the content field and try again."
		}
		var next, answered []string
		for j, b := range content.Array() {
			bp := p + ".content." + strconv.Itoa(j)
			name, v, msg := unionMember(bp, b)
			if msg != "" {
				return msg
			}
			if msg := checkConverseBlock(bp, role, name, v); msg != "" {
				return msg
			}
			switch name {
			case "toolUse":
				toolBlocks = true
				next = append(next, v.Get("toolUseId").Str)
				if role == "assistant" {
					lastToolTurn = i
				}
			case "toolResult":
				toolBlocks = true
				id := v.Get("toolUseId").Str
				if indexOf(uses, id) < 0 {
					return "The toolUseId " + id + " at " + bp + ".toolResult does not match a toolUse block of the previous turn."
				}
				answered = append(answered, id)
			}
		}
		var missing []string
		for _, u := range uses {
			if indexOf(answered, u) < 0 {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return "Expected toolResult blocks at " + p + ".content for the following Ids: " + strings.Join(missing, ", ")
		}
		uses = next
	}
	if toolBlocks && len(tools) == 0 {
		return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
	}
	if q.claudeThinking && lastToolTurn >= 0 && lastToolTurn == lastAssistant(q.msgs) {
		first := q.msgs[lastToolTurn].Get("content.0")
		if !first.Get("reasoningContent").Exists() {
			return "The model returned the following errors: messages." + strconv.Itoa(lastToolTurn) +
				".content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, " +
				"a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)." //nolint:misspell // Bedrock's message, verbatim
		}
	}
	if tc := q.toolConfig.Get("toolChoice"); q.additional.Get("thinking.type").Str == "enabled" && (tc.Get("any").Exists() || tc.Get("tool").Exists()) {
		return "The model returned the following errors: Thinking may not be enabled when tool_choice forces tool use."
	}
	return ""
}

// lastAssistant is the index of the last assistant turn, or -1.
func lastAssistant(msgs []gjson.Result) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Get("role").Str == "assistant" {
			return i
		}
	}
	return -1
}

// Formats Converse's blocks take.
var (
	bedrockImageFormats    = []string{"png", "jpeg", "gif", "webp"}
	bedrockDocumentFormats = []string{"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"}
	bedrockAudioFormats    = []string{"mp3", "opus", "wav", "aac", "flac", "mp4", "ogg", "mkv", "mka", "x-aac", "m4a", "mpeg", "mpga", "pcm", "webm"}
)

// checkConverseBlock checks one content block of a message of role (or,
// for role "toolResult", of a tool result's content).
func checkConverseBlock(bp, role, name string, v gjson.Result) string {
	user, assistant := role == "user", role == "assistant"
	switch {
	case name == "text":
		if v.Type != gjson.String || strings.TrimSpace(v.Str) == "" {
			return "The text field in the ContentBlock object at " + bp + " is blank. Add text to the text field, and try again."
		}
	case name == "json" && role == "toolResult":
		if !v.Exists() || v.Type == gjson.Null {
			return bp + ".json must be a JSON value"
		}
	case name == "image" && (user || role == "toolResult"):
		if indexOf(bedrockImageFormats, v.Get("format").Str) < 0 {
			return bp + ".image.format must be png, jpeg, gif or webp"
		}
		return checkBedrockSource(bp+".image.source", v.Get("source"), false)
	case name == "document" && (user || role == "toolResult"):
		if indexOf(bedrockDocumentFormats, v.Get("format").Str) < 0 {
			return bp + ".document.format must be one of " + strings.Join(bedrockDocumentFormats, ", ")
		}
		if n := v.Get("name").Str; n == "" || strings.Contains(n, "  ") || strings.IndexFunc(n, func(r rune) bool {
			return !(r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" -()[]", r)))
		}) >= 0 {
			return bp + ".document.name may only hold alphanumeric characters, single spaces, hyphens, parentheses and square brackets"
		}
		return checkBedrockSource(bp+".document.source", v.Get("source"), true)
	case name == "audio" && user:
		if indexOf(bedrockAudioFormats, v.Get("format").Str) < 0 {
			return bp + ".audio.format is not an audio format Bedrock knows"
		}
		return checkBedrockSource(bp+".audio.source", v.Get("source"), false)
	case name == "toolUse" && assistant:
		if !toolName(v.Get("toolUseId").Str) || !toolName(v.Get("name").Str) || !v.Get("input").IsObject() {
			return bp + ".toolUse needs a toolUseId and a name of [a-zA-Z0-9_-]{1,64} and an object input"
		}
	case name == "toolResult" && user:
		if !toolName(v.Get("toolUseId").Str) {
			return bp + ".toolResult.toolUseId must match [a-zA-Z0-9_-]{1,64}"
		}
		if s := v.Get("status"); s.Exists() && s.Str != "success" && s.Str != "error" {
			return bp + ".toolResult.status must be success or error"
		}
		c := v.Get("content")
		if !c.IsArray() {
			return bp + ".toolResult.content must be an array"
		}
		for k, b := range c.Array() {
			p := bp + ".toolResult.content." + strconv.Itoa(k)
			n, m, msg := unionMember(p, b)
			if msg != "" {
				return msg
			}
			if msg := checkConverseBlock(p, "toolResult", n, m); msg != "" {
				return msg
			}
		}
	case name == "reasoningContent" && assistant:
		n, m, msg := unionMember(bp+".reasoningContent", v)
		if msg != "" {
			return msg
		}
		switch n {
		case "reasoningText":
			text, sig := m.Get("text"), m.Get("signature")
			if text.Type != gjson.String {
				return bp + ".reasoningContent.reasoningText.text must be a string"
			}
			if sig.Exists() && sig.Str != bedrockSignature(text.Str) {
				return "The model returned the following errors: " + bp + ": Invalid `signature` in `thinking` block"
			}
		case "redactedContent":
			if _, err := base64.StdEncoding.DecodeString(m.Str); err != nil || m.Str == "" {
				return bp + ".reasoningContent.redactedContent must be base64"
			}
		default:
			return bp + ".reasoningContent has no member " + strconv.Quote(n)
		}
	case name == "cachePoint":
		if v.Get("type").Str != "default" {
			return bp + ".cachePoint.type must be default"
		}
	case name == "guardContent" || name == "video" || name == "citationsContent" || name == "searchResult":
	default:
		return bp + ": a " + role + " message cannot hold a " + strconv.Quote(name) + " block"
	}
	return ""
}

// checkBedrockSource checks the source of an image, document or audio
// block: base64 bytes, an s3Location, or (documents) text or content.
func checkBedrockSource(p string, src gjson.Result, document bool) string {
	name, v, msg := unionMember(p, src)
	if msg != "" {
		return msg
	}
	switch {
	case name == "bytes":
		if _, err := base64.StdEncoding.DecodeString(v.Str); err != nil || v.Str == "" {
			return p + ".bytes must be base64"
		}
	case name == "s3Location":
		if !strings.HasPrefix(v.Get("uri").Str, "s3://") {
			return p + ".s3Location.uri must be an s3:// URI"
		}
	case document && (name == "text" || name == "content"):
	default:
		return p + " has no member " + strconv.Quote(name)
	}
	return ""
}
