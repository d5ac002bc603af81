package openai

import "testing"

func TestNative(t *testing.T) {
	body := []byte(`{"model":"gpt-5","input":[{"role":"user","content":"hi"}],"reasoning":{"effort":"high"},"x_future_field":{"model":"keep"}}`)
	req, err := Native{}.NativeRequest("/responses", body, "gpt-5-2025-08-07", nil)
	if err != nil || req.Path != "/responses" {
		t.Fatal(req, err)
	}
	checkOnlyModel(t, body, req.Body, "gpt-5-2025-08-07")
}
