package bedrock

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
)

// TestBatchEncode: a chat line becomes a record whose modelInput is the
// InvokeModel body Claude takes (no model or stream, Bedrock's
// anthropic_version); other models' lines are refused, so that they run
// in the gateway.
func TestBatchEncode(t *testing.T) {
	b := Batches{}
	rec, err := b.Encode(batch.EndpointChat, "17", []byte(`{"model":"x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"max_tokens":20}`), "us.anthropic.claude-sonnet-4-5-20250929-v1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(rec)
	in := r.Get("modelInput")
	switch {
	case r.Get("recordId").Str != "17":
		t.Errorf("recordId in %s", rec)
	case in.Get("anthropic_version").Str != AnthropicVersion || in.Get("model").Exists() || in.Get("stream").Exists():
		t.Errorf("modelInput %s", in.Raw)
	case in.Get("system").String() == "" || in.Get("messages.0.content").String() == "" || in.Get("max_tokens").Int() != 20:
		t.Errorf("modelInput %s", in.Raw)
	case strings.Contains(string(rec), "\n"):
		t.Errorf("the record is more than one line: %s", rec)
	}
	// An application inference profile is batched as the Claude model
	// behind it, with that model's features (Sonnet 4.6: adaptive
	// thinking).
	profile := "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/team-a"
	withBase := Batches{Messages: Messages{BaseModels: map[string]string{profile: "anthropic.claude-sonnet-4-6"}}}
	if rec, err := withBase.Encode(batch.EndpointChat, "2", []byte(`{"messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}`), profile); err != nil ||
		gjson.GetBytes(rec, "modelInput.thinking.type").Str != "adaptive" {
		t.Errorf("a profile of Claude: %s, %v", rec, err)
	}
	if _, err := b.Encode(batch.EndpointChat, "1", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), profile); err == nil {
		t.Error("a profile of an unknown model was encoded")
	}
	if _, err := b.Encode(batch.EndpointChat, "1", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), "amazon.nova-lite-v1:0"); err == nil {
		t.Error("a Nova line was encoded for batch inference")
	}
	if l := b.Limits(batch.EndpointEmbeddings); l.MaxRequests != 0 {
		t.Errorf("embeddings limits %+v", l)
	}
	if l := b.Limits(batch.EndpointChat); l.MinRequests != 100 || l.MaxRequests == 0 {
		t.Errorf("chat limits %+v", l)
	}
}

// TestBatchResultLine reads each kind of output record.
func TestBatchResultLine(t *testing.T) {
	b := Batches{}
	for _, tc := range []struct {
		name, line, key string
		status          int
		code, contains  string
	}{
		{"answer", `{"recordId":"3","modelInput":{},"modelOutput":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}}`, "3", 200, "", "hello"},
		{"refused", `{"recordId":"4","modelInput":{},"error":{"errorCode":400,"errorMessage":"messages: bad"}}`, "4", 400, "", "messages: bad"},
		{"throttled", `{"recordId":"5","error":{"errorCode":429,"errorMessage":"Too many requests"}}`, "5", 429, "", "rate_limit_error"},
		{"a code that is no status", `{"recordId":"6","error":{"errorCode":7}}`, "6", 500, "", "could not answer"},
		{"an answer that is no message", `{"recordId":"7","modelOutput":{"type":"nonsense"}}`, "7", 502, "", "could not be read"},
		{"neither", `{"recordId":"8","modelInput":{}}`, "8", 0, "result_missing", ""},
		{"not JSON", `{"recordId":"9",`, "", 0, "result_missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.ResultLine([]byte(tc.line))
			if res.Key != tc.key || res.Status != tc.status || res.Code != tc.code || !strings.Contains(string(res.Body), tc.contains) {
				t.Errorf("%+v (body %s)", res, res.Body)
			}
			if res.Status == 200 && gjson.GetBytes(res.Body, "object").Str != "chat.completion" {
				t.Errorf("body %s", res.Body)
			}
		})
	}
}

// answerWith is a Send that answers every request with status and body, and
// records the requests.
func answerWith(status int, body string, got *[]providers.Request) providers.Send {
	return func(_ context.Context, req providers.Request) (providers.Answer, error) {
		*got = append(*got, req)
		return providers.Answer{Status: status, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

// TestBatchPoll maps each job status; the job's ARN is escaped whole into
// the path.
func TestBatchPoll(t *testing.T) {
	const arn = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc"
	for status, want := range map[string]string{
		"Submitted": batch.NativeRunning, "Validating": batch.NativeRunning, "Scheduled": batch.NativeRunning, "InProgress": batch.NativeRunning,
		"Stopping": batch.NativeRunning, "Completed": batch.NativeCompleted, "PartiallyCompleted": batch.NativeCompleted,
		"Stopped": batch.NativeCancelled, "Expired": batch.NativeExpired, "Failed": batch.NativeFailed,
	} {
		var got []providers.Request
		st, err := Batches{Control: answerWith(200, `{"status":"`+status+`","message":"no access to the bucket"}`, &got)}.Poll(context.Background(), batch.NativeRef{ID: arn})
		if err != nil || st.State != want {
			t.Errorf("%s: %+v, %v; want %s", status, st, err, want)
		}
		if status == "Failed" && st.Message != "no access to the bucket" {
			t.Errorf("failed job's message %q", st.Message)
		}
		if len(got) != 1 || got[0].Path != "/model-invocation-job/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Amodel-invocation-job%2Fabc" {
			t.Errorf("%s: requests %+v", status, got)
		}
	}
	var got []providers.Request
	if _, err := (Batches{Control: answerWith(200, `{"status":"Dreaming"}`, &got)}).Poll(context.Background(), batch.NativeRef{ID: arn}); err == nil {
		t.Error("an unknown status was taken")
	}
	_, err := Batches{Control: answerWith(403, `{"message":"not allowed"}`, &got)}.Poll(context.Background(), batch.NativeRef{ID: arn})
	if r, ok := errors.AsType[*batch.NativeRefusal](err); !ok || r.Status != 403 || r.Message != "not allowed" {
		t.Errorf("a 403: %v", err)
	}
}

// TestBatchSubmitRefusals: without a bucket and role nothing is sent; S3's
// XML error is read into the refusal.
func TestBatchSubmitRefusals(t *testing.T) {
	var got []providers.Request
	s := &batch.NativeSubmission{Marker: "mg-1", Model: "anthropic.claude-sonnet-4-5-20250929-v1:0", Count: 1, Bytes: 3,
		Records: func() io.ReadCloser { return io.NopCloser(strings.NewReader("{}\n")) }}
	_, err := Batches{Control: answerWith(200, `{}`, &got), Storage: answerWith(200, ``, &got)}.Submit(context.Background(), s)
	if _, ok := errors.AsType[*batch.NativeRefusal](err); !ok || len(got) != 0 {
		t.Errorf("no bucket: %v, %d requests", err, len(got))
	}
	b := Batches{Bucket: "b-1", Prefix: "p/q", RoleARN: "arn:aws:iam::123456789012:role/r", Control: answerWith(200, `{}`, &got),
		Storage: answerWith(403, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied &amp; more</Message></Error>`, &got)}
	_, err = b.Submit(context.Background(), s)
	if r, ok := errors.AsType[*batch.NativeRefusal](err); !ok || r.Message != "the bucket: AccessDenied: Access Denied & more" {
		t.Errorf("S3's refusal: %v", err)
	}
	if len(got) != 1 || got[0].Method != http.MethodPut || got[0].Path != "/p/q/mg-1/records.jsonl" || got[0].Length != 3 {
		t.Errorf("requests %+v", got)
	}
}

func TestParseS3URI(t *testing.T) {
	for uri, want := range map[string]string{
		"s3://mg-batches":                 "mg-batches|",
		"s3://mg-batches/":                "mg-batches|",
		"s3://mg.batches/a/b_c/":          "mg.batches|a/b_c",
		"s3://mg-batches/a(1)/*x*":        "mg-batches|a(1)/*x*",
		"gs://mg-batches":                 "error",
		"s3://MG":                         "error",
		"s3://ab":                         "error",
		"s3://-ab":                        "error",
		"s3://a..b":                       "error",
		"s3://mg-batches/a//b":            "error",
		"s3://mg-batches/../b":            "error",
		"s3://mg-batches/a b":             "error",
		"s3://mg-batches/a?b":             "error",
		"s3://" + strings.Repeat("a", 64): "error",
	} {
		bucket, prefix, err := ParseS3URI(uri)
		got := bucket + "|" + prefix
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("%s: %s, want %s", uri, got, want)
		}
	}
	for arn, want := range map[string]bool{
		"arn:aws:iam::123456789012:role/bedrock-batch":    true,
		"arn:aws-us-gov:iam::123456789012:role/path/to/r": true,
		"arn:aws:iam::123456789012:user/u":                false,
		"arn:aws:iam::1234:role/r":                        false,
		"arn:aws:iam::123456789012:role/":                 false,
		"arn:aws:iam::123456789012:role/r\"":              false,
	} {
		if ValidRoleARN(arn) != want {
			t.Errorf("ValidRoleARN(%s) != %v", arn, want)
		}
	}
}

// BenchmarkBatchLine is one line's work in a batch: encoding the chat
// line into a record, and reading its output record back.
func BenchmarkBatchLine(b *testing.B) {
	api := Batches{}
	body := []byte(`{"model":"x","messages":[{"role":"system","content":"You answer in one sentence."},{"role":"user","content":"What is the capital of France, and why is it famous?"}],"max_tokens":200}`)
	out := []byte(`{"recordId":"3","modelInput":{},"modelOutput":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Paris, famous for the Eiffel Tower and its museums."}],"stop_reason":"end_turn","usage":{"input_tokens":30,"output_tokens":12}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := api.Encode(batch.EndpointChat, "3", body, "us.anthropic.claude-sonnet-4-5-20250929-v1:0"); err != nil {
			b.Fatal(err)
		}
		if res := api.ResultLine(out); res.Status != 200 {
			b.Fatal(res)
		}
	}
}
