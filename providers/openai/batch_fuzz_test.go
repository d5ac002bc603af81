package openai

import (
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzResultLine: any line of a result file reads without a panic, and an
// answered line's body is JSON (an error one in OpenAI's shape).
func FuzzResultLine(f *testing.F) {
	f.Add([]byte(`{"id":"batch_req_1","custom_id":"7","response":{"status_code":200,"request_id":"r","body":{"object":"chat.completion"}},"error":null}`))
	f.Add([]byte(`{"id":"batch_req_2","custom_id":"8","response":{"status_code":400,"request_id":"r","body":"<html>"},"error":null}`))
	f.Add([]byte(`{"custom_id":"9","response":null,"error":{"code":"batch_expired","message":"late"}}`))
	f.Add([]byte(`{"custom_id":`))
	f.Fuzz(func(t *testing.T, line []byte) {
		res := ResultLine(line)
		switch {
		case res.Status >= 400 && gjson.GetBytes(res.Body, "error.message").Type != gjson.String:
			t.Errorf("error body %s is not OpenAI's shape", res.Body)
		case res.Status == 0 && res.Code == "":
			t.Errorf("no answer and no code for %q", line)
		}
	})
}
