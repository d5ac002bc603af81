package bedrock

import (
	"strings"
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

// FuzzParseS3URI: what the batch_bucket option takes parses again to
// itself, and its keys cannot climb out of the prefix.
func FuzzParseS3URI(f *testing.F) {
	for _, s := range []string{"s3://mg-batches", "s3://mg.b/a/b/", "s3://x/../y", "s3://a-b/%2e%2e", "gs://a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		bucket, prefix, err := ParseS3URI(uri)
		if err != nil {
			return
		}
		uri2 := "s3://" + bucket
		if prefix != "" {
			uri2 += "/" + prefix
		}
		b2, p2, err := ParseS3URI(uri2)
		if err != nil || b2 != bucket || p2 != prefix {
			t.Errorf("%q parsed to %q %q, which parses to %q %q %v", uri, bucket, prefix, b2, p2, err)
		}
		for _, seg := range strings.Split(prefix, "/") {
			if prefix != "" && (seg == "" || seg == "." || seg == ".." || strings.ContainsAny(seg, "%?#\\ ")) {
				t.Errorf("%q: prefix %q has the segment %q", uri, prefix, seg)
			}
		}
	})
}
