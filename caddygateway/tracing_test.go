package caddygateway

import (
	"net/url"
	"testing"
)

func TestServerAddress(t *testing.T) {
	for raw, want := range map[string]struct {
		host string
		port int
	}{
		"https://api.openai.com/v1":           {"api.openai.com", 443},
		"http://localhost:11434/v1":           {"localhost", 11434},
		"http://vllm.internal/v1":             {"vllm.internal", 80},
		"https://[2001:db8::1]:8443/v1":       {"2001:db8::1", 8443},
		"https://user:secret@example.com/api": {"example.com", 443},
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if host, port := serverAddress(u); host != want.host || port != want.port {
			t.Errorf("serverAddress(%s) = %s, %d; want %s, %d", raw, host, port, want.host, want.port)
		}
	}
	if host, port := serverAddress(nil); host != "" || port != 0 {
		t.Errorf("serverAddress(nil) = %q, %d", host, port)
	}
}
