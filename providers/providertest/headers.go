package providertest

import (
	"net/http"
	"strings"
)

// ResponseHeaders are the response headers the real provider behind path sends
// with every answer beside Content-Type and Date, as the providers document
// them, with typical values: OpenAI's request id, processing time and six
// rate-limit headers; Anthropic's request id and twelve rate-limit headers
// (real answers carry more: a CDN's, an organization's). Whatever the gateway
// does with them, a proxy receives and copies them on every request (plain
// reverse_proxy passes them all on to its client), so a benchmark whose fake
// sent none would understate what every proxy does per request: the
// benchmarks' upstreams (bench/cmd/loadbench's canned one, caddygateway's in
// memory) add them to the fake's answers. Cohere's answers get none: it does
// not document its headers. Path is the provider's, as the fake serves it
// (/v1/messages is Anthropic's Messages API, any other /v1/ path OpenAI's).
func ResponseHeaders(path string) http.Header {
	switch {
	case path == "/v1/messages":
		h := http.Header{
			"Request-Id": {"req_011CSHoEeqs5C35K2UUqR7Fy"},
		}
		for _, kind := range []string{"Requests", "Tokens", "Input-Tokens", "Output-Tokens"} {
			h["Anthropic-Ratelimit-"+kind+"-Limit"] = []string{"4000000"}
			h["Anthropic-Ratelimit-"+kind+"-Remaining"] = []string{"3999000"}
			h["Anthropic-Ratelimit-"+kind+"-Reset"] = []string{"2026-11-27T12:00:01Z"}
		}
		return h
	case strings.HasPrefix(path, "/v1/"):
		return http.Header{
			"X-Request-Id":                   {"req_5f8a2c1e9b7d4a3f8e6c0b2a1d9f7e5c"},
			"Openai-Processing-Ms":           {"412"},
			"X-Ratelimit-Limit-Requests":     {"10000"},
			"X-Ratelimit-Limit-Tokens":       {"30000000"},
			"X-Ratelimit-Remaining-Requests": {"9999"},
			"X-Ratelimit-Remaining-Tokens":   {"29999950"},
			"X-Ratelimit-Reset-Requests":     {"6ms"},
			"X-Ratelimit-Reset-Tokens":       {"0s"},
		}
	}
	return nil
}
