package bedrock

import (
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzBatchResultLine: any output record reads without a panic into a
// chat.completion, an error in OpenAI's shape, or a missing result.
func FuzzBatchResultLine(f *testing.F) {
	f.Add(`{"recordId":"0","modelInput":{},"modelOutput":{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":2,"output_tokens":1}}}`)
	f.Add(`{"recordId":"1","modelInput":{},"error":{"errorCode":400,"errorMessage":"bad"}}`)
	f.Add(`{"recordId":"2","error":{"errorCode":"x"}}`)
	f.Add(`{"modelOutput":"x"}`)
	f.Add(`[]`)
	b := Batches{}
	f.Fuzz(func(t *testing.T, line string) {
		res := b.ResultLine([]byte(line))
		switch {
		case res.Status == 0:
			if res.Code == "" {
				t.Errorf("no status and no code for %q", line)
			}
		case res.Status == 200 && gjson.GetBytes(res.Body, "object").Str != "chat.completion":
			t.Errorf("answer %s is not a chat.completion", res.Body)
		case res.Status != 200 && (res.Status < 400 || res.Status > 599 || gjson.GetBytes(res.Body, "error.message").Type != gjson.String):
			t.Errorf("status %d, body %s", res.Status, res.Body)
		}
	})
}
