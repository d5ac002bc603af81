package gemini

import (
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzBatchResult: any inline response reads without a panic into a
// chat.completion or an error in OpenAI's shape.
func FuzzBatchResult(f *testing.F) {
	f.Add(`{"response":{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}},"metadata":{"key":"0"}}`)
	f.Add(`{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"},"metadata":{"key":"1"}}`)
	f.Add(`{"error":{"status":"RESOURCE_EXHAUSTED"}}`)
	f.Add(`{"response":"x"}`)
	b := Batches{}
	f.Fuzz(func(t *testing.T, line string) {
		res := b.result(gjson.Parse(line))
		switch {
		case res.Status == 200 && gjson.GetBytes(res.Body, "object").Str != "chat.completion":
			t.Errorf("answer %s is not a chat.completion", res.Body)
		case res.Status != 200 && (res.Status < 400 || gjson.GetBytes(res.Body, "error.message").Type != gjson.String):
			t.Errorf("status %d, body %s", res.Status, res.Body)
		}
	})
}
