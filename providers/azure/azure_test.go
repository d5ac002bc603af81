package azure

import (
	"net/http"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func TestChatRequest(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		name              string
		c                 Chat
		model             string
		path, query, want string
	}{
		{"v1, model is the deployment", Chat{}, "prod-4o", "/openai/v1/chat/completions", "", "prod-4o"},
		{"v1, mapped", Chat{Deployments: map[string]string{"gpt-4o": "prod-4o"}}, "gpt-4o", "/openai/v1/chat/completions", "", "prod-4o"},
		{"classic", Chat{APIVersion: "2024-10-21"}, "prod-4o", "/openai/deployments/prod-4o/chat/completions", "api-version=2024-10-21", "prod-4o"},
		{"classic, mapped", Chat{APIVersion: "2025-04-01-preview", Deployments: map[string]string{"gpt-4o": "eu 4o"}}, "gpt-4o",
			"/openai/deployments/eu%204o/chat/completions", "api-version=2025-04-01-preview", "eu 4o"},
		{"classic, no path escape", Chat{APIVersion: "v"}, "../../x?y=1", "/openai/deployments/..%2F..%2Fx%3Fy=1/chat/completions", "api-version=v", "../../x?y=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.c.ChatRequest(body, tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if req.Path != tc.path || req.Query != tc.query {
				t.Errorf("path %q query %q, want %q %q", req.Path, req.Query, tc.path, tc.query)
			}
			if m := gjson.GetBytes(req.Body, "model").Str; m != tc.want {
				t.Errorf("body model %q, want %q", m, tc.want)
			}
			if !gjson.GetBytes(req.Body, "stream").Bool() || req.Framing != nil {
				t.Errorf("body %s, framing %v", req.Body, req.Framing)
			}
		})
	}
}

func TestError(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		code, typ  string
	}{
		{"throttled", `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation have exceeded call rate limit. Please retry after 7 seconds."}}`, 429, "rate_limit_exceeded", "rate_limit_error"},
		{"content filter", `{"error":{"message":"The response was filtered","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`, 400, "content_filter", "invalid_request_error"},
		{"no deployment", `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`, 404, "model_not_found", "not_found_error"},
		{"context", `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 400, "context_length_exceeded", "invalid_request_error"},
		{"html from a proxy", `<html>502</html>`, 502, "", "server_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Chat{}.Error(tc.status, http.Header{}, []byte(tc.body))
			if e.Status != tc.status || e.Code != tc.code || e.Type != tc.typ || e.Message == "" {
				t.Errorf("%+v", e)
			}
		})
	}
}

func FuzzChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), "dep", "2024-10-21")
	f.Fuzz(func(t *testing.T, body []byte, model, version string) {
		if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
			return
		}
		req, err := Chat{APIVersion: version}.ChatRequest(body, model)
		if err != nil {
			return
		}
		if !gjson.ValidBytes(req.Body) || utf8.ValidString(model) && gjson.GetBytes(req.Body, "model").Str != model {
			t.Fatalf("%q for %q", req.Body, model)
		}
	})
}

func TestNative(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","input":"hi","store":false}`)
	for _, tc := range []struct {
		c           Chat
		path, query string
	}{
		{Chat{Deployments: map[string]string{"gpt-4o": "prod"}}, "/openai/v1/responses", ""},
		{Chat{APIVersion: "2025-03-01-preview", Deployments: map[string]string{"gpt-4o": "prod"}}, "/openai/responses", "api-version=2025-03-01-preview"},
	} {
		req, err := Native{tc.c}.NativeRequest("/responses", body, "gpt-4o", nil)
		if err != nil || req.Path != tc.path || req.Query != tc.query || string(req.Body) != `{"model":"prod","input":"hi","store":false}` {
			t.Errorf("%+v %s %v", req, req.Body, err)
		}
	}
}
