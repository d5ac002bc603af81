package anthropic

import (
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzResultLine: any line of a batch's results reads without a panic;
// an answered line's body is a chat.completion or an error in OpenAI's
// shape.
func FuzzResultLine(f *testing.F) {
	f.Add([]byte(`{"custom_id":"1","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}}}`))
	f.Add([]byte(`{"custom_id":"2","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"bad"},"request_id":"req_1"}}}`))
	f.Add([]byte(`{"custom_id":"3","result":{"type":"expired"}}`))
	f.Add([]byte(`{"custom_id":"4","result":{"type":"succeeded","message":"x"}}`))
	b := Batches{}
	f.Fuzz(func(t *testing.T, line []byte) {
		res := b.ResultLine(line)
		switch {
		case res.Status == 200 && gjson.GetBytes(res.Body, "object").Str != "chat.completion":
			t.Errorf("answer %s is not a chat.completion", res.Body)
		case res.Status >= 400 && gjson.GetBytes(res.Body, "error.message").Type != gjson.String:
			t.Errorf("error body %s is not OpenAI's shape", res.Body)
		case res.Status == 0 && res.Code == "":
			t.Errorf("no answer and no code for %q", line)
		}
	})
}
