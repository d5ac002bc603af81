package vertex

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/gemini"
)

func batchesFor(control, storage providers.Send) Batches {
	return Batches{Control: control, Storage: storage, Bucket: "mg-b", Prefix: "p",
		Chat: Chat{Google: gemini.Chat{Vertex: true, Project: "proj", Location: "us-central1"},
			Claude: anthropic.Vertex{Project: "proj", Location: "us-central1"}}}
}

// TestBatchEncode: a chat line becomes {"request": GenerateContentRequest}
// with its key in a label beside the labels the translator sets; Claude,
// endpoints and express mode are not batched.
func TestBatchEncode(t *testing.T) {
	b := batchesFor(nil, nil)
	rec, err := b.Encode(batch.EndpointChat, "12", []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"max_tokens":20}`), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(rec)
	if r.Get("request.labels."+KeyLabel).Str != "12" || r.Get("request.contents.0.parts.0.text").Str != "hi" || r.Get("request.generationConfig.maxOutputTokens").Int() != 20 || len(r.Map()) != 1 {
		t.Errorf("line %s", rec)
	}
	rec, err = b.Encode(batch.EndpointChat, "13", []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}],"max_tokens":20}`), "claude-sonnet-4-5@20250929")
	if err != nil {
		t.Fatal(err)
	}
	r = gjson.ParseBytes(rec)
	if r.Get("custom_id").Str != "13" || r.Get("request.anthropic_version").Str != anthropic.VertexVersion || r.Get("request.model").Exists() ||
		r.Get("request.messages.0.content").String() == "" || len(r.Map()) != 2 {
		t.Errorf("Claude's line %s", rec)
	}
	if _, err := (Batches{Chat: Chat{Google: gemini.Chat{Vertex: true, Project: "p"}}}).Encode(batch.EndpointChat, "1", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), "claude-sonnet-4-5"); err == nil {
		t.Error("Claude without a project was encoded")
	}
	for _, m := range []string{"publishers/anthropic/models/a/b", "endpoints/123", "publishers/meta/models/llama"} {
		if _, err := b.Encode(batch.EndpointChat, "1", []byte(`{"messages":[{"role":"user","content":"hi"}]}`), m); err == nil {
			t.Errorf("%s was encoded for batch prediction", m)
		}
	}
	if l := b.Limits(batch.EndpointChat); l.MaxRequests == 0 {
		t.Errorf("chat limits %+v", l)
	}
	if l := (Batches{}).Limits(batch.EndpointChat); l.MaxRequests != 0 {
		t.Errorf("express mode limits %+v", l)
	}
}

// TestBatchResultLine reads each kind of output line.
func TestBatchResultLine(t *testing.T) {
	b := batchesFor(nil, nil)
	for _, tc := range []struct {
		name, line, key string
		status          int
		code, contains  string
	}{
		{"answer", `{"status":"","processed_time":"2026-01-01T00:00:00Z","request":{"contents":[],"labels":{"modelgate_key":"3"}},"response":{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1},"responseId":"r-1"}}`, "3", 200, "", "hello"},
		{"refused", `{"status":"Bad Request: {\"error\": {\"code\": 400, \"message\": \"Please use a valid role\", \"status\": \"INVALID_ARGUMENT\"}}","request":{"labels":{"modelgate_key":"4"}}}`, "4", 400, "", "Please use a valid role"},
		{"a status in words", `{"status":"Internal error occurred.","request":{"labels":{"modelgate_key":"5"}}}`, "5", 500, "", "Internal error occurred."},
		{"an answer that is no answer", `{"status":"","request":{"labels":{"modelgate_key":"6"}},"response":{"candidates":"x"}}`, "6", 502, "", "could not be read"},
		{"neither", `{"status":"","request":{"labels":{"modelgate_key":"7"}}}`, "7", 0, "result_missing", ""},
		{"Claude's answer", `{"custom_id":"8","status":"","request":{},"response":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hey"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}}`, "8", 200, "", "hey"},
		{"Claude's refusal", `{"custom_id":"9","status":"Bad Request: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"top_p: bad\"}}","request":{}}`, "9", 400, "", "top_p: bad"},
		{"Anthropic's result shape", `{"custom_id":"10","result":{"type":"succeeded","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"yo"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}}}`, "10", 200, "", "yo"},
		{"Anthropic's errored result", `{"custom_id":"11","result":{"type":"errored","error":{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}}}`, "11", 429, "", "slow down"},
		{"not JSON", `{"status":`, "", 0, "result_missing", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.ResultLine([]byte(tc.line))
			if res.Key != tc.key || res.Status != tc.status || res.Code != tc.code || !strings.Contains(string(res.Body), tc.contains) {
				t.Errorf("%+v (body %s)", res, res.Body)
			}
			if res.Status == 200 && (gjson.GetBytes(res.Body, "object").Str != "chat.completion" || res.RequestID == "") {
				t.Errorf("body %s, request id %q", res.Body, res.RequestID)
			}
		})
	}
}

func answerWith(status int, body string, got *[]providers.Request) providers.Send {
	return func(_ context.Context, req providers.Request) (providers.Answer, error) {
		*got = append(*got, req)
		return providers.Answer{Status: status, Body: io.NopCloser(strings.NewReader(body))}, nil
	}
}

// TestBatchPoll maps each job state, carries the output directory in the
// reference, and refuses names that are not a job's.
func TestBatchPoll(t *testing.T) {
	const name = "projects/proj/locations/us-central1/batchPredictionJobs/123"
	for state, want := range map[string]string{
		"JOB_STATE_QUEUED": batch.NativeRunning, "JOB_STATE_PENDING": batch.NativeRunning, "JOB_STATE_RUNNING": batch.NativeRunning,
		"JOB_STATE_CANCELLING": batch.NativeRunning, "JOB_STATE_PAUSED": batch.NativeRunning, "JOB_STATE_SUCCEEDED": batch.NativeCompleted,
		"JOB_STATE_PARTIALLY_SUCCEEDED": batch.NativeCompleted, "JOB_STATE_CANCELLED": batch.NativeCancelled,
		"JOB_STATE_EXPIRED": batch.NativeExpired, "JOB_STATE_FAILED": batch.NativeFailed,
	} {
		var got []providers.Request
		body := `{"state":"` + state + `","error":{"code":7,"message":"no access to the bucket"},"outputInfo":{"gcsOutputDirectory":"gs://mg-b/p/out/prediction-model-1"},"completionStats":{"successfulCount":"3","failedCount":"1"}}`
		st, err := batchesFor(answerWith(200, body, &got), nil).Poll(context.Background(), batch.NativeRef{ID: name})
		if err != nil || st.State != want || st.Completed != 3 || st.Failed != 1 || st.Ref.Data["output"] != "gs://mg-b/p/out/prediction-model-1" {
			t.Errorf("%s: %+v, %v; want %s", state, st, err, want)
		}
		if state == "JOB_STATE_FAILED" && st.Message != "no access to the bucket" {
			t.Errorf("failed job's message %q", st.Message)
		}
		if len(got) != 1 || got[0].Path != "/"+name || got[0].Method != http.MethodGet {
			t.Errorf("%s: requests %+v", state, got)
		}
	}
	for _, bad := range []string{"batches/1", "projects/p/locations/l/batchPredictionJobs/../x", "projects/p/locations/l/batchPredictionJobs/1:cancel", "projects/p/locations/l/batchPredictionJobs/1/x"} {
		var got []providers.Request
		if _, err := batchesFor(answerWith(200, `{}`, &got), nil).Poll(context.Background(), batch.NativeRef{ID: bad}); err == nil || len(got) != 0 {
			t.Errorf("%s: %v, %d requests", bad, err, len(got))
		}
	}
}

func TestParseGCSURI(t *testing.T) {
	for uri, want := range map[string]string{
		"gs://mg-b":                       "mg-b|",
		"gs://mg_b.x/a/b/":                "mg_b.x|a/b",
		"s3://mg-b":                       "error",
		"gs://MG":                         "error",
		"gs://mg-":                        "error",
		"gs://mg-b/a//b":                  "error",
		"gs://mg-b/./b":                   "error",
		"gs://mg-b/a%2F":                  "error",
		"gs://" + strings.Repeat("a", 64): "error",
	} {
		bucket, prefix, err := ParseGCSURI(uri)
		got := bucket + "|" + prefix
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("%s: %s, want %s", uri, got, want)
		}
	}
}

// BenchmarkBatchLine is one line's work in a batch: encoding the chat
// line for Gemini, and reading its output line back.
func BenchmarkBatchLine(b *testing.B) {
	api := batchesFor(nil, nil)
	body := []byte(`{"model":"x","messages":[{"role":"system","content":"You answer in one sentence."},{"role":"user","content":"What is the capital of France, and why is it famous?"}],"max_tokens":200}`)
	out := []byte(`{"status":"","processed_time":"2026-01-01T00:00:00Z","request":{"contents":[],"labels":{"modelgate_key":"3"}},"response":{"candidates":[{"content":{"role":"model","parts":[{"text":"Paris, famous for the Eiffel Tower and its museums."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":12},"responseId":"r-1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := api.Encode(batch.EndpointChat, "3", body, "gemini-2.5-flash"); err != nil {
			b.Fatal(err)
		}
		if res := api.ResultLine(out); res.Status != 200 {
			b.Fatal(res)
		}
	}
}
