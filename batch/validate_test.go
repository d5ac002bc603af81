package batch

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/tidwall/gjson"
)

// sizedLine is a chat line of exactly n bytes (n >= 120).
func sizedLine(customID string, n int) string {
	l := chatLine(customID, "ok")
	pad := n - len(l)
	return strings.Replace(l, `"content":"Hi"`, `"content":"Hi`+strings.Repeat("x", pad)+`"`, 1)
}

// lines joins request lines with newlines and a final one.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

// goodLines are n good lines with custom_ids r-1 … r-n.
func goodLines(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, chatLine(fmt.Sprintf("r-%d", i), "ok"))
	}
	return out
}

func withLine(ls []string, at int, l string) []string { // at is 1-based
	ls = slices.Clone(ls)
	ls[at-1] = l
	return ls
}

func TestValidationFails(t *testing.T) {
	t.Parallel()
	good := goodLines(20)
	raw := func(s string) string { return s }
	manyBad := make([]string, 150)
	for i := range manyBad {
		manyBad[i] = "nope"
	}
	manyBadLines := make([]int, 100)
	for i := range manyBadLines {
		manyBadLines[i] = i + 1
	}
	for _, tc := range []struct {
		name    string
		content string
		lines   []int // 0: no line
		code    string
		maxReq  int // MaxRequests; 0: 1000
	}{
		{"bad JSON", lines(good[0], good[1], "", `{"custom_id":"x",`, good[3]), []int{4}, "invalid_json", 0},
		{"JSON array", lines(good[0], `[1,2]`), []int{2}, "invalid_json", 0},
		{"JSON string", lines(`"a string"`, good[0]), []int{1}, "invalid_json", 0},
		{"JSON number", lines(good[0], "", "", "42"), []int{4}, "invalid_json", 0},
		{"two values on a line", lines(good[0], good[1]+good[2]), []int{2}, "invalid_json", 0},
		{"duplicate custom_id, late in the file", lines(withLine(good, 18, chatLine("r-2", "ok"))...), []int{18}, "duplicate_custom_id", 0},
		{"custom_id missing", lines(good[0], `{"method":"POST","url":"/v1/chat/completions","body":{"model":"ok"}}`), []int{2}, "invalid_custom_id", 0},
		{"custom_id a number", lines(`{"custom_id":7,"method":"POST","url":"/v1/chat/completions","body":{"model":"ok"}}`), []int{1}, "invalid_custom_id", 0},
		{"custom_id empty", lines(`{"custom_id":"","method":"POST","url":"/v1/chat/completions","body":{"model":"ok"}}`), []int{1}, "invalid_custom_id", 0},
		{"method GET", lines(good[0], strings.Replace(good[1], `"POST"`, `"GET"`, 1)), []int{2}, "invalid_method", 0},
		{"method missing", lines(`{"custom_id":"a","url":"/v1/chat/completions","body":{"model":"ok"}}`), []int{1}, "invalid_method", 0},
		{"url of another endpoint", lines(strings.Replace(good[0], "/v1/chat/completions", "/v1/embeddings", 1)), []int{1}, "invalid_url", 0},
		{"body missing", lines(good[0], `{"custom_id":"a","method":"POST","url":"/v1/chat/completions"}`), []int{2}, "invalid_body", 0},
		{"body a string", lines(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":"{}"}`), []int{1}, "invalid_body", 0},
		{"body an array", lines(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":[{"model":"ok"}]}`), []int{1}, "invalid_body", 0},
		{"stream true", lines(good[0], `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"ok","stream":true}}`), []int{2}, "invalid_body", 0},
		{"unroutable model", lines(append(good[:9:9], chatLine("u", "unknown"))...), []int{10}, "invalid_request", 0},
		{"model missing", lines(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`), []int{1}, "invalid_request", 0},
		{"more than MaxRequests", lines(good[:6]...), []int{6}, "too_many_requests", 5},
		{"more than MaxRequests, blank lines count", lines(good[0], "", good[1], good[2], "", good[3], good[4], good[5]), []int{8}, "too_many_requests", 5},
		{"line too long", lines(good[0], good[1], sizedLine("long", 4097), good[3]), []int{3}, "line_too_long", 0},
		{"last line too long, no final newline", raw(lines(good[0]) + sizedLine("long", 4097)), []int{2}, "line_too_long", 0},
		{"last line too long with CRLF", raw(good[0] + "\r\n" + sizedLine("long", 4097) + "\r\n"), []int{2}, "line_too_long", 0},
		{"empty file", "", []int{0}, "empty_file", 0},
		{"blank lines only", "\n \n\t\n\n", []int{0}, "empty_file", 0},
		{"several errors, in order", lines(good[0], "x", good[2], good[3], strings.Replace(good[4], `"POST"`, `"PUT"`, 1), good[5]), []int{2, 5}, "", 0},
		{"errors and too many requests", lines(good[0], "x", good[2], good[3], good[4], good[5], good[6]), []int{2, 6}, "", 5},
		{"errors are capped", lines(manyBad...), manyBadLines, "invalid_json", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := storagetest.NewMemory()
			st := NewStore(mem, "mg")
			ex := newFakeExecutor()
			set := testSettings()
			set.MaxRequests = cmp.Or(tc.maxReq, 1000)
			f, err := st.PutFile(context.Background(), testOwner, "in.jsonl", PurposeBatch, strings.NewReader(tc.content), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			b := createBatch(t, st, f, time.Hour)
			startRunner(t, st, "inst-a", staticLive(set, ex))
			b = waitFor(t, st, b.ID, "the batch to end", func(b Batch) bool { return b.Status != StatusValidating })
			if b.Status != StatusFailed {
				t.Fatalf("status %s, want failed", b.Status)
			}
			if b.FailedAt == nil || b.InProgressAt != nil || b.OutputFileID != nil || b.ErrorFileID != nil {
				t.Errorf("failed_at %v, in_progress_at %v, output %v, error %v", b.FailedAt, b.InProgressAt, b.OutputFileID, b.ErrorFileID)
			}
			if b.Errors == nil || b.Errors.Object != "list" {
				t.Fatalf("errors = %+v", b.Errors)
			}
			var got []int
			for _, e := range b.Errors.Data {
				line := 0
				if e.Line != nil {
					line = *e.Line
				}
				got = append(got, line)
				if tc.code != "" && e.Code != tc.code {
					t.Errorf("line %d: code %q (%s), want %q", line, e.Code, e.Message, tc.code)
				}
				if e.Message == "" {
					t.Errorf("line %d: no message", line)
				}
				if line > 0 && !strings.Contains(e.Message, fmt.Sprint(line)) && e.Code != "too_many_requests" {
					t.Errorf("line %d: message %q does not name the line", line, e.Message)
				}
			}
			if !slices.Equal(got, tc.lines) {
				t.Errorf("errors name lines %v, want %v", got, tc.lines)
			}
			if n := ex.totalCalls(); n != 0 {
				t.Errorf("the executor got %d requests of a refused batch", n)
			}
			checkCleanedUp(t, mem, st, b.ID)
		})
	}
}

func TestValidationPasses(t *testing.T) {
	t.Parallel()
	good := goodLines(6)
	for _, tc := range []struct {
		name    string
		content string
		n       int
	}{
		{"MaxRequests lines", lines(good[:5]...), 5},
		{"blank and CRLF lines, no final newline", "\n" + good[0] + "\r\n\r\n  " + good[1] + "  \n\n" + good[2], 3},
		{"a line of MaxLineBytes", lines(good[0], sizedLine("r-2", 4096)), 2},
		{"a last line of MaxLineBytes, no final newline", good[0] + "\n" + sizedLine("r-2", 4096), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := NewStore(storagetest.NewMemory(), "mg")
			ex := newFakeExecutor()
			set := testSettings()
			set.MaxRequests = 5
			f, err := st.PutFile(context.Background(), testOwner, "in.jsonl", PurposeBatch, strings.NewReader(tc.content), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			b := createBatch(t, st, f, time.Hour)
			startRunner(t, st, "inst-a", staticLive(set, ex))
			b = waitFor(t, st, b.ID, "the batch to end", func(b Batch) bool { return b.Status == StatusCompleted || b.Status == StatusFailed })
			if b.Status != StatusCompleted {
				t.Fatalf("status %s, errors %+v", b.Status, b.Errors)
			}
			want := make([]string, tc.n)
			for i := range want {
				want[i] = fmt.Sprintf("r-%d", i+1)
			}
			if b.RequestCounts != (RequestCounts{Total: len(want), Completed: len(want)}) {
				t.Errorf("request_counts %+v", b.RequestCounts)
			}
			checkExactlyOnce(t, want, readResultFile(t, st, b.OutputFileID))
		})
	}
}

// TestValidateMissingInput: an input file deleted before validation fails
// the batch without a line.
func TestValidateMissingInput(t *testing.T) {
	t.Parallel()
	st := NewStore(storagetest.NewMemory(), "mg")
	f := putInput(t, st, goodLines(3)...)
	b := createBatch(t, st, f, time.Hour)
	if _, err := st.DeleteFile(context.Background(), testOwner, f.ID); err != nil {
		t.Fatal(err)
	}
	startRunner(t, st, "inst-a", staticLive(testSettings(), newFakeExecutor()))
	b = waitStatus(t, st, b.ID, StatusFailed)
	if len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "file_not_found" || b.Errors.Data[0].Line != nil {
		t.Errorf("errors %+v", b.Errors.Data)
	}
}

// TestValidateParts: the validated lines are cut into parts of PartLines
// requests, in order, blank lines dropped.
func TestValidateParts(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	good := goodLines(17)
	content := lines(good[:3]...) + "\n\n" + lines(good[3:]...)
	f, err := st.PutFile(ctx, testOwner, "in", PurposeBatch, strings.NewReader(content), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	b := createBatch(t, st, f, time.Hour)
	rec, err := st.batchRecord(ctx, testOwner, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.validate(ctx, rec, newFakeExecutor(), testSettings(), nil)
	if err != nil || len(v.errors) > 0 {
		t.Fatalf("validate: %v %+v", err, v.errors)
	}
	if v.total != 17 || v.model != "ok" {
		t.Errorf("total %d, model %q", v.total, v.model)
	}
	want := []partState{{Start: 0, N: 7}, {Start: 7, N: 7}, {Start: 14, N: 3}}
	if !slices.Equal(v.parts, want) {
		t.Errorf("parts %+v, want %+v", v.parts, want)
	}
	var all []string
	for i := range want {
		b, err := mem.Load(ctx, fmt.Sprintf("%s/input/%06d", st.batchDir(testOwner, b.ID), i))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	if !slices.Equal(all, good) {
		t.Errorf("parts hold %q, want %q", all, good)
	}
}

func TestValidateModel(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		models []string
		want   string
	}{
		{[]string{"ok", "ok", "ok"}, "ok"},
		{[]string{"ok", "slow", "ok"}, ""},
	} {
		st := NewStore(storagetest.NewMemory(), "mg")
		var ls []string
		for i, m := range tc.models {
			ls = append(ls, chatLine(fmt.Sprint(i), m))
		}
		b := createBatch(t, st, putInput(t, st, ls...), time.Hour)
		rec, _ := st.batchRecord(ctx, testOwner, b.ID)
		v, err := st.validate(ctx, rec, newFakeExecutor(), testSettings(), nil)
		if err != nil || v.model != tc.want {
			t.Errorf("models %v: model %q (%v), want %q", tc.models, v.model, err, tc.want)
		}
	}
}

func TestReadLine(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want []string // "!" marks a line too long
	}{
		{"", 5, nil},
		{"abc", 5, []string{"abc"}},
		{"abc\n", 5, []string{"abc"}},
		{"abc\n\nde", 5, []string{"abc", "", "de"}},
		{"abcde\nabcdef\nab", 5, []string{"abcde", "!", "ab"}},
		{"abcdef", 5, []string{"!"}},
		{"abcdef\n", 5, []string{"!"}},
		{"abcde", 5, []string{"abcde"}},
		{"\n\n", 0, []string{"", ""}},
		{"a", 0, []string{"!"}},
		{strings.Repeat("x", 100) + "\nok", 70, []string{"!", "ok"}}, // spans the 16-byte buffer
		{strings.Repeat("y", 70) + "\n" + strings.Repeat("z", 71), 70, []string{strings.Repeat("y", 70), "!"}},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		var got []string
		for {
			line, tooLong, err := readLine(br, tc.max)
			if errors.Is(err, io.EOF) && line == nil && !tooLong {
				break
			}
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("%q: %v", tc.in, err)
			}
			if tooLong {
				got = append(got, "!")
			} else {
				got = append(got, string(line))
			}
			if len(got) > 10 {
				break
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("readLine(%q, %d) gives %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("abc\ndef\n"), 3)
	f.Add([]byte("abcd"), 3)
	f.Add([]byte("\n\n\n"), 0)
	f.Add([]byte("abc\r\nxyz"), 4)
	f.Add(bytes.Repeat([]byte("0123456789"), 10), 17)
	f.Add(append(bytes.Repeat([]byte("z"), 40), '\n'), 39)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var total int
		for range len(in) + 2 {
			line, tooLong, err := readLine(br, max)
			if errors.Is(err, io.EOF) && line == nil {
				return
			}
			if err != nil {
				t.Fatalf("readLine: %v", err)
			}
			if len(line) > max {
				t.Fatalf("readLine(max %d) returned %d bytes", max, len(line))
			}
			if tooLong && line != nil {
				t.Fatalf("a line too long came with %d bytes", len(line))
			}
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line %q holds a newline", line)
			}
			total += len(line)
			if total > len(in) {
				t.Fatalf("read %d bytes of lines from %d bytes", total, len(in))
			}
		}
		t.Fatalf("readLine never reached EOF on %d bytes", len(in))
	})
}

func FuzzValidateLine(f *testing.F) {
	f.Add([]byte(chatLine("a", "ok")))
	f.Add([]byte(chatLine("a", "unknown")))
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"ok","stream":true}}`))
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":[]}`))
	f.Add([]byte(`{"custom_id":"a","custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"model":"ok"}}`))
	f.Add([]byte(`{"custom_id":"dup","method":"POST","url":"/v1/chat/completions","body":{"model":"ok"}}`))
	f.Add([]byte(`[{"custom_id":"a"}]`))
	f.Add([]byte(`{"a":` + strings.Repeat("[", 20000)))
	f.Add([]byte("{\"custom_id\":\"\\u0000\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"ok\"}}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, line []byte) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			return // validate skips blank lines before checkLine
		}
		v := new(validation)
		seen := map[string]struct{}{"dup": {}}
		route, ok := v.checkLine(3, line, EndpointChat, seen, newFakeExecutor())
		if ok != (len(v.errors) == 0) {
			t.Fatalf("ok %v with errors %+v", ok, v.errors)
		}
		if !ok {
			if len(v.errors) != 1 || v.errors[0].Line == nil || *v.errors[0].Line != 3 || v.errors[0].Code == "" {
				t.Fatalf("a refused line gives errors %+v", v.errors)
			}
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted %q, which is not JSON", line)
		}
		var req struct {
			CustomID *string         `json:"custom_id"`
			Method   *string         `json:"method"`
			URL      *string         `json:"url"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatalf("accepted %q: %v", line, err)
		}
		if req.Method == nil || req.URL == nil || req.CustomID == nil {
			t.Fatalf("accepted %q without the fields", line)
		}
		// gjson reads the first of duplicate keys, encoding/json the last:
		// check what the engine reads.
		g := gjson.GetManyBytes(line, "custom_id", "method", "url", "body", "body.model")
		if g[0].Str == "" || g[0].Str == "dup" || g[1].Str != "POST" || g[2].Str != EndpointChat || !g[3].IsObject() {
			t.Fatalf("accepted %q", line)
		}
		if route.Model != gjson.Get(g[3].Raw, "model").Str || route.Model == "" || route.Model == "unknown" {
			t.Fatalf("accepted %q with route %+v", line, route)
		}
		if _, ok := seen[g[0].Str]; !ok {
			t.Fatalf("accepted %q without recording its custom_id", line)
		}
	})
}

// TestValidateAllowedModels: a batch created by a key limited to some models
// passes the limit to Check with every line, and a line for another model
// fails the batch.
func TestValidateAllowedModels(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		models []string
		failed []int
	}{
		{"no limit", nil, nil},
		{"allowed", []string{"ok"}, nil},
		{"another model", []string{"slow"}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore(storagetest.NewMemory(), "mg")
			f := putInput(t, st, chatLine("a", "ok"), chatLine("b", "ok"))
			b, err := st.CreateBatch(ctx, testOwner, CreateParams{
				InputFileID: f.ID, Endpoint: EndpointChat, CompletionWindow: "24h", Window: time.Hour, Models: tc.models,
			})
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := st.batchRecord(ctx, testOwner, b.ID)
			v, err := st.validate(ctx, rec, newFakeExecutor(), testSettings(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, e := range v.errors {
				got = append(got, *e.Line)
			}
			if !slices.Equal(got, tc.failed) {
				t.Errorf("lines refused %v, want %v (%+v)", got, tc.failed, v.errors)
			}
		})
	}
}
