package providertest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/oauth2/google"
)

const (
	gePath = "/v1beta/models/gemini-2.5-flash:generateContent"
	vxPath = "/v1/projects/p1/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"
)

var geAuth = []string{"X-Goog-Api-Key", "gk"}

// geminiBody is a request naming contents, with more top-level fields.
func geminiBody(contents string, more ...string) string {
	b := `{"contents":[` + contents + `]`
	for _, m := range more {
		b += "," + m
	}
	return b + "}"
}

const geUser = `{"role":"user","parts":[{"text":"weather in Paris"}]}`

func TestGeminiAnswers(t *testing.T) {
	s := Start(t, Options{Keys: map[string]string{"gemini": "gk"}})
	tools := `"tools":[{"functionDeclarations":[{"name":"search","parametersJsonSchema":{"type":"object"}},{"name":"lookup"}]}]`
	tests := []struct {
		name, path, body string
		check            func(a gjson.Result) bool
	}{
		{"echo", gePath, geminiBody(geUser, `"systemInstruction":{"parts":[{"text":"be brief"}]}`), func(a gjson.Result) bool {
			return a.Get("candidates.0.content.parts.0.text").Str == "echo: weather in Paris" && a.Get("candidates.0.finishReason").Str == "STOP" &&
				a.Get("usageMetadata.promptTokenCount").Int() == 5 && a.Get("usageMetadata.candidatesTokenCount").Int() == 4 &&
				a.Get("usageMetadata.totalTokenCount").Int() == 9 && a.Get("modelVersion").Str == "gemini-2.5-flash" && a.Get("responseId").Str != ""
		}},
		{"tool call", gePath, geminiBody(geUser, tools), func(a gjson.Result) bool {
			fc := a.Get("candidates.0.content.parts.0.functionCall")
			return fc.Get("name").Str == "search" && fc.Get("args.query").Str == "weather in Paris" &&
				a.Get("candidates.0.finishReason").Str == "STOP" && !a.Get("candidates.0.content.parts.0.thoughtSignature").Exists()
		}},
		{"named tool", gePath, geminiBody(geUser, tools, `"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["lookup"]}}`), func(a gjson.Result) bool {
			return a.Get("candidates.0.content.parts.0.functionCall.name").Str == "lookup"
		}},
		{"tools off", gePath, geminiBody(geUser, tools, `"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}`), func(a gjson.Result) bool {
			return a.Get("candidates.0.content.parts.0.text").Str == "echo: weather in Paris"
		}},
		{"tool results", gePath, geminiBody(geUser+
			`,{"role":"model","parts":[{"functionCall":{"name":"search","args":{"query":"weather in Paris"}}},{"functionCall":{"name":"lookup","args":{}}}]}`+
			`,{"role":"user","parts":[{"functionResponse":{"name":"search","response":{"result":"sunny, 21 C"}}},{"functionResponse":{"name":"lookup","response":{"temp": 14}}}]}`, tools),
			func(a gjson.Result) bool {
				return a.Get("candidates.0.content.parts.0.text").Str == `tool said: sunny, 21 C {"temp": 14}`
			}},
		{"max tokens", gePath, geminiBody(geUser, `"generationConfig":{"maxOutputTokens":2}`), func(a gjson.Result) bool {
			return a.Get("candidates.0.content.parts.0.text").Str == "echo: weather" && a.Get("candidates.0.finishReason").Str == "MAX_TOKENS"
		}},
		{"structured", gePath, geminiBody(geUser, `"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"summary":{"type":"string"},"words":{"type":"integer"}}}}`),
			func(a gjson.Result) bool {
				text := a.Get("candidates.0.content.parts.0.text").Str
				return gjson.Get(text, "summary").Str == "echo: weather in Paris" && gjson.Get(text, "words").Int() == 4
			}},
		{"thoughts", "/v1beta/models/gemini-3-flash-preview:generateContent", geminiBody(geUser, `"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"LOW"}}`),
			func(a gjson.Result) bool {
				p := a.Get("candidates.0.content.parts")
				return p.Get("0.thought").Type == gjson.True && p.Get("0.text").Str == "The user said: weather in Paris" &&
					p.Get("1.text").Str == "echo: weather in Paris" && isBase64(p.Get("1.thoughtSignature").Str) &&
					a.Get("usageMetadata.thoughtsTokenCount").Int() == 6 && a.Get("usageMetadata.totalTokenCount").Int() == 3+4+6
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, tc.path, tc.body, geAuth...)
			if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !tc.check(gjson.Parse(body)) {
				t.Errorf("%d %s", res.StatusCode, body)
			}
		})
	}
	if res, body := post(t, s, gePath, geminiBody(geUser), "X-Goog-Api-Key", "wrong"); res.StatusCode != 400 || gjson.Get(body, "error.details.0.reason").Str != "API_KEY_INVALID" {
		t.Errorf("wrong key: %d %s", res.StatusCode, body)
	}
	if res, body := post(t, s, gePath+"?key=gk", geminiBody(geUser)); res.StatusCode != 200 {
		t.Errorf("?key=: %d %s", res.StatusCode, body)
	}
	if res, body := post(t, s, "/v1beta/models/fail-429:generateContent", geminiBody(geUser), geAuth...); res.StatusCode != 429 ||
		gjson.Get(body, "error.status").Str != "RESOURCE_EXHAUSTED" || gjson.Get(body, `error.details.#(@type%"*RetryInfo").retryDelay`).Str != "1s" {
		t.Errorf("fail-429: %d %s", res.StatusCode, body)
	}
}

func TestGeminiStream(t *testing.T) {
	s := Start(t, Options{})
	stream := strings.Replace(gePath, ":generateContent", ":streamGenerateContent", 1)
	res, body := post(t, s, stream+"?alt=sse", geminiBody(geUser), geAuth...)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	events := strings.Split(strings.TrimSuffix(body, "\r\n\r\n"), "\r\n\r\n")
	var text strings.Builder
	for i, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || !gjson.Valid(data) {
			t.Fatalf("event %d: %q", i, ev)
		}
		text.WriteString(gjson.Get(data, "candidates.0.content.parts.0.text").Str)
		if fin := gjson.Get(data, "candidates.0.finishReason").Str; (i == len(events)-1) != (fin == "STOP") {
			t.Errorf("event %d finishReason %q", i, fin)
		}
	}
	last := events[len(events)-1]
	if text.String() != "echo: weather in Paris" || len(events) != 5 || gjson.Get(last[6:], "usageMetadata.candidatesTokenCount").Int() != 4 {
		t.Errorf("streamed %q in %d events: %s", text.String(), len(events), body)
	}

	// Without alt=sse the responses come as one JSON array.
	res, body = post(t, s, stream, geminiBody(geUser), geAuth...)
	if res.StatusCode != 200 || !gjson.Valid(body) || !gjson.Parse(body).IsArray() || len(gjson.Parse(body).Array()) != 5 {
		t.Errorf("array stream: %d %s", res.StatusCode, body)
	}

	// A failure in the middle is Google's error object, bare, after the
	// first word.
	_, body = post(t, s, "/v1beta/models/midstream-error:streamGenerateContent?alt=sse", geminiBody(geUser), geAuth...)
	first, rest, _ := strings.Cut(body, "\r\n\r\n")
	if !strings.HasPrefix(first, "data: ") || !strings.HasPrefix(rest, "{\n") || gjson.Get(rest, "error.status").Str != "UNAVAILABLE" {
		t.Errorf("midstream-error: %q", body)
	}
	_, body = post(t, s, "/v1beta/models/cutoff:streamGenerateContent?alt=sse", geminiBody(geUser), geAuth...)
	if strings.Count(body, "data: ") != 1 || strings.Contains(body, "finishReason") {
		t.Errorf("cutoff: %q", body)
	}
}

// TestGeminiStrict: requests Gemini refuses are 400 INVALID_ARGUMENT.
func TestGeminiStrict(t *testing.T) {
	s := Start(t, Options{})
	fc := `{"role":"model","parts":[{"functionCall":{"name":"search","args":{}}}]}`
	fr := `{"role":"user","parts":[{"functionResponse":{"name":"search","response":{"ok":true}}}]}`
	tools := `"tools":[{"functionDeclarations":[{"name":"search"}]}]`
	tests := []struct {
		name, path, body, want string
	}{
		{"OpenAI's fields", gePath, `{"model":"x","messages":[]}`, `Unknown name "model"`},
		{"no contents", gePath, `{"generationConfig":{}}`, "contents is not specified"},
		{"empty parts", gePath, geminiBody(`{"role":"user","parts":[]}`), "must not be empty"},
		{"bad role", gePath, geminiBody(`{"role":"assistant","parts":[{"text":"x"}]}`), "valid role"},
		{"empty text", gePath, geminiBody(`{"role":"user","parts":[{"text":""}]}`), "empty text parameter"},
		{"two data fields", gePath, geminiBody(`{"role":"user","parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":"AA=="}}]}`), "already set"},
		{"unknown part field", gePath, geminiBody(`{"role":"user","parts":[{"type":"text","text":"a"}]}`), `Unknown name "type"`},
		{"bad base64", gePath, geminiBody(`{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"not base64!"}}]}`), "Base64 decoding failed"},
		{"bad signature", gePath, geminiBody(`{"role":"user","parts":[{"text":"a","thoughtSignature":"%%%"}]}`), "thought_signature"},
		{"call in a user turn", gePath, geminiBody(`{"role":"user","parts":[{"functionCall":{"name":"search"}}]}`), "model turns"},
		{"call unanswered", gePath, geminiBody(geUser+","+fc, tools), "function call turn"},
		{"responses miscounted", gePath, geminiBody(geUser+","+fc+`,{"role":"user","parts":[{"functionResponse":{"name":"search","response":{}}},{"functionResponse":{"name":"search","response":{}}}]}`, tools), "number of function response parts"},
		{"response without a call", gePath, geminiBody(geUser + "," + fr), "immediately after a function call turn"},
		{"response not an object", gePath, geminiBody(geUser+","+fc+`,{"role":"user","parts":[{"functionResponse":{"name":"search","response":"ok"}}]}`, tools), "response must be an object"},
		{"both schemas", gePath, geminiBody(geUser, `"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"},"parametersJsonSchema":{"type":"object"}}]}]`), "mutually exclusive"},
		{"schema not an object", gePath, geminiBody(geUser, `"tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"type":"string"}}]}]`), "describe an object"},
		{"duplicate function", gePath, geminiBody(geUser, `"tools":[{"functionDeclarations":[{"name":"f"},{"name":"f"}]}]`), "Duplicate"},
		{"allowed names with AUTO", gePath, geminiBody(geUser, tools, `"toolConfig":{"functionCallingConfig":{"mode":"AUTO","allowedFunctionNames":["search"]}}`), "only be set when the mode is ANY"},
		{"unknown allowed name", gePath, geminiBody(geUser, tools, `"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["nope"]}}`), "not declared"},
		{"unknown config field", gePath, geminiBody(geUser, `"generationConfig":{"max_tokens":5}`), `Unknown name "max_tokens"`},
		{"temperature range", gePath, geminiBody(geUser, `"generationConfig":{"temperature":2.5}`), "temperature"},
		{"candidates range", gePath, geminiBody(geUser, `"generationConfig":{"candidateCount":9}`), "candidate_count"},
		{"six stop sequences", gePath, geminiBody(geUser, `"generationConfig":{"stopSequences":["a","b","c","d","e","f"]}`), "at most 5"},
		{"logprobs alone", gePath, geminiBody(geUser, `"generationConfig":{"logprobs":3}`), "response_logprobs"},
		{"schema without JSON", gePath, geminiBody(geUser, `"generationConfig":{"responseJsonSchema":{"type":"object"}}`), "application/json"},
		{"budget and level", "/v1beta/models/gemini-3-flash-preview:generateContent", geminiBody(geUser, `"generationConfig":{"thinkingConfig":{"thinkingBudget":1024,"thinkingLevel":"LOW"}}`), "only one of"},
		{"level on 2.5", gePath, geminiBody(geUser, `"generationConfig":{"thinkingConfig":{"thinkingLevel":"LOW"}}`), "not supported for this model"},
		{"MEDIUM on 3 Pro", "/v1beta/models/gemini-3-pro-preview:generateContent", geminiBody(geUser, `"generationConfig":{"thinkingConfig":{"thinkingLevel":"MEDIUM"}}`), "MEDIUM is not supported"},
		{"service tier", gePath, geminiBody(geUser, `"serviceTier":"gold"`), "service_tier"},
		{"vertex-only field", gePath, geminiBody(geUser, `"labels":{"team":"a"}`), `Unknown name "labels"`},
		{"vertex: no role", vxPath, geminiBody(`{"parts":[{"text":"x"}]}`), "valid role"},
		{"vertex: fileData without mimeType", vxPath, geminiBody(`{"role":"user","parts":[{"fileData":{"fileUri":"gs://b/x.png"}}]}`), "mime_type is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			auth := geAuth
			if strings.HasPrefix(tc.path, "/v1/") {
				auth = []string{"Authorization", "Bearer vk"}
			}
			res, body := post(t, s, tc.path, tc.body, auth...)
			if res.StatusCode != 400 || gjson.Get(body, "error.status").Str != "INVALID_ARGUMENT" || !strings.Contains(gjson.Get(body, "error.message").Str, tc.want) {
				t.Errorf("%d %s, want 400 INVALID_ARGUMENT saying %q", res.StatusCode, body, tc.want)
			}
		})
	}
	// What the Developer API allows: no role (user), fileData without a
	// mimeType.
	if res, body := post(t, s, gePath, geminiBody(`{"parts":[{"text":"x"},{"fileData":{"fileUri":"https://x/y.png"}}]}`), geAuth...); res.StatusCode != 200 {
		t.Errorf("%d %s", res.StatusCode, body)
	}
}

// TestGeminiSignatures: a Gemini 3 model signs its function calls and
// refuses the next request of the turn unless the first call of each step
// comes back with exactly that signature (or Google's dummy value).
func TestGeminiSignatures(t *testing.T) {
	s := Start(t, Options{})
	path := "/v1beta/models/gemini-3-flash-preview:generateContent"
	tools := `"tools":[{"functionDeclarations":[{"name":"search"}]}]`
	res, body := post(t, s, path, geminiBody(geUser, tools), geAuth...)
	part := gjson.Get(body, "candidates.0.content.parts.0")
	sig := part.Get("thoughtSignature").Str
	if res.StatusCode != 200 || part.Get("functionCall.name").Str != "search" || !isBase64(sig) {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	call := func(sig string) string {
		p := `{"functionCall":{"name":"search","args":{"query": "weather in Paris"}}`
		if sig != "" {
			p += `,"thoughtSignature":"` + sig + `"`
		}
		return `{"role":"model","parts":[` + p + `}]}`
	}
	result := `{"role":"user","parts":[{"functionResponse":{"name":"search","response":{"result":"sunny"}}}]}`
	for _, tc := range []struct {
		name, sig, want string
	}{
		{"returned", sig, ""},
		{"dummy", "skip_thought_signature_validator", ""},
		{"missing", "", "missing a thought_signature"},
		{"another", "c29tZSBvdGhlciBzaWduYXR1cmU=", "Corrupted thought signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, s, path, geminiBody(geUser+","+call(tc.sig)+","+result, tools), geAuth...)
			if tc.want == "" {
				if res.StatusCode != 200 || gjson.Get(body, "candidates.0.content.parts.0.text").Str != "tool said: sunny" {
					t.Errorf("%d %s", res.StatusCode, body)
				}
				return
			}
			if res.StatusCode != 400 || !strings.Contains(gjson.Get(body, "error.message").Str, tc.want) {
				t.Errorf("%d %s, want 400 %q", res.StatusCode, body, tc.want)
			}
		})
	}
	// Only the current turn counts: after a new user message, an old call
	// without its signature passes.
	res, body = post(t, s, path, geminiBody(geUser+","+call("")+","+result+`,{"role":"model","parts":[{"text":"sunny"}]},{"role":"user","parts":[{"text":"thanks"}]}`, tools), geAuth...)
	if res.StatusCode != 200 {
		t.Errorf("an earlier turn: %d %s", res.StatusCode, body)
	}
	// A Gemini 2.5 model validates nothing.
	if res, body := post(t, s, gePath, geminiBody(geUser+","+call("")+","+result, tools), geAuth...); res.StatusCode != 200 {
		t.Errorf("gemini-2.5: %d %s", res.StatusCode, body)
	}
}

// TestVertexTokens: the token endpoint issues access tokens to the service
// account of GoogleServiceAccount through golang.org/x/oauth2/google; Vertex
// takes them until they expire, and the library fetches a new one before.
func TestVertexTokens(t *testing.T) {
	s := Start(t, Options{GoogleTokenLifetime: 11 * time.Second})
	ctx := context.Background()
	creds, err := google.CredentialsFromJSONWithTypeAndParams(ctx, s.GoogleServiceAccount(""), google.ServiceAccount,
		google.CredentialsParams{Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
	if err != nil {
		t.Fatal(err)
	}
	if creds.ProjectID != googleProject {
		t.Errorf("project %q", creds.ProjectID)
	}
	tok, err := creds.TokenSource.Token()
	if err != nil {
		t.Fatal(err)
	}
	issued := s.GoogleTokens()
	if len(issued) != 1 || issued[0].Token != tok.AccessToken || issued[0].Email != googleServiceAccount ||
		tok.Expiry.Sub(issued[0].Issued) < 10*time.Second || tok.Expiry.Sub(issued[0].Issued) > 12*time.Second {
		t.Fatalf("issued %+v, got %+v", issued, tok)
	}
	if res, body := post(t, s, vxPath, geminiBody(geUser), "Authorization", "Bearer "+tok.AccessToken); res.StatusCode != 200 ||
		gjson.Get(body, "candidates.0.content.parts.0.text").Str != "echo: weather in Paris" || gjson.Get(body, "usageMetadata.trafficType").Str == "" {
		t.Errorf("vertex with the token: %d %s", res.StatusCode, body)
	}
	// x/oauth2 refreshes a token 10 s before it expires: with 11 s to live
	// the next one comes after a second.
	time.Sleep(1200 * time.Millisecond)
	tok2, err := creds.TokenSource.Token()
	if err != nil {
		t.Fatal(err)
	}
	if tok2.AccessToken == tok.AccessToken || len(s.GoogleTokens()) != 2 {
		t.Errorf("no new token before expiry: %+v", s.GoogleTokens())
	}

	// Tokens that expired, or that the fake never issued, are refused.
	short := Start(t, Options{GoogleTokenLifetime: time.Millisecond})
	creds, err = google.CredentialsFromJSONWithTypeAndParams(ctx, short.GoogleServiceAccount(""), google.ServiceAccount,
		google.CredentialsParams{Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creds.TokenSource.Token(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	for _, tc := range []struct{ tok, reason string }{
		{short.GoogleTokens()[0].Token, "ACCESS_TOKEN_EXPIRED"},
		{googleTokenPrefix + "never-issued", "ACCESS_TOKEN_TYPE_UNSUPPORTED"},
	} {
		res, body := post(t, short, vxPath, geminiBody(geUser), "Authorization", "Bearer "+tc.tok)
		if res.StatusCode != 401 || gjson.Get(body, "error.status").Str != "UNAUTHENTICATED" || gjson.Get(body, "error.details.0.reason").Str != tc.reason {
			t.Errorf("%s: %d %s", tc.reason, res.StatusCode, body)
		}
	}

	// Another server's key does not sign for this one.
	other, err := google.CredentialsFromJSONWithTypeAndParams(ctx, s.GoogleServiceAccount(short.URL), google.ServiceAccount,
		google.CredentialsParams{Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TokenSource.Token(); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("a foreign key got a token: %v", err)
	}
	if res, body := post(t, s, GoogleTokenPath, "grant_type=client_credentials", "Content-Type", "application/x-www-form-urlencoded"); res.StatusCode != 400 ||
		gjson.Get(body, "error").Str != "unsupported_grant_type" {
		t.Errorf("client credentials: %d %s", res.StatusCode, body)
	}
	// Express mode takes an API key.
	express := "/v1/publishers/google/models/gemini-2.5-flash:generateContent"
	if res, body := post(t, s, express, geminiBody(geUser), geAuth...); res.StatusCode != 200 {
		t.Errorf("express: %d %s", res.StatusCode, body)
	}
	if res, _ := send(t, s, http.MethodGet, GoogleTokenPath, ""); res.StatusCode != 404 {
		t.Errorf("GET token endpoint: %d", res.StatusCode)
	}
}
