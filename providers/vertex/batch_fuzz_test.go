package vertex

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzBatchResultLine: any output line reads without a panic into a
// chat.completion, an error in OpenAI's shape, or a missing result.
func FuzzBatchResultLine(f *testing.F) {
	f.Add(`{"status":"","request":{"labels":{"modelgate_key":"0"}},"response":{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}}`)
	f.Add(`{"status":"Bad Request: {\"error\": {\"code\": 400, \"message\": \"bad\"}}","request":{}}`)
	f.Add(`{"status":"x {\"error\":{\"code\":99999,\"message\":\"m\"}}"}`)
	f.Add(`{"response":"x","status":""}`)
	f.Add(`{"custom_id":"1","result":{"type":"errored","error":{"type":"error","error":{"type":"overloaded_error","message":"m"}}}}`)
	f.Add(`{"custom_id":"2","status":"x {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"m\"}}"}`)
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

// FuzzParseGCSURI: what the batch_bucket option takes parses again to
// itself, and its objects cannot climb out of the prefix.
func FuzzParseGCSURI(f *testing.F) {
	for _, s := range []string{"gs://mg-batches", "gs://mg_b.x/a/b/", "gs://x/../y", "gs://a-b/%2e%2e", "s3://a-b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		bucket, prefix, err := ParseGCSURI(uri)
		if err != nil {
			return
		}
		uri2 := "gs://" + bucket
		if prefix != "" {
			uri2 += "/" + prefix
		}
		b2, p2, err := ParseGCSURI(uri2)
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
