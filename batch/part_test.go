package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/storagetest"
	"github.com/tidwall/gjson"
)

type ckRecord struct {
	idx  int
	ok   bool
	line string
}

func readAllCheckpoints(t *testing.T, st *Store, dir string, part int) []ckRecord {
	t.Helper()
	var got []ckRecord
	err := st.readCheckpoints(context.Background(), dir, part, func(idx int, ok bool, line []byte) {
		got = append(got, ckRecord{idx, ok, string(line)})
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestReadCheckpoints(t *testing.T) {
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	dir := "mg/b"
	put := func(name, content string) {
		if err := mem.Store(ctx, path.Join(dir, "results", "000001", name), []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	put("a-000000002", "9 o {\"x\":2}\n")
	put("a-000000001", strings.Join([]string{
		`5 o {"x":1}`,
		`x o {"bad":"index"}`,
		`6 z {"bad":"kind"}`,
		`7 oo {"bad":"kind"}`,
		`8 o `,
		`10 e {"err":1}`,
		`11 e {"torn"`,
	}, "\n"))
	// Another part's checkpoints are not this part's.
	if err := mem.Store(ctx, path.Join(dir, "results", "000002", "a-000000001"), []byte("1 o {}\n")); err != nil {
		t.Fatal(err)
	}
	got := readAllCheckpoints(t, st, dir, 1)
	want := []ckRecord{{5, true, `{"x":1}`}, {10, false, `{"err":1}`}, {9, true, `{"x":2}`}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := readAllCheckpoints(t, st, dir, 3); len(got) != 0 {
		t.Errorf("a part without checkpoints: %+v", got)
	}
}

func FuzzCheckpoints(f *testing.F) {
	f.Add([]byte("1 o {}\n2 e {}\n"))
	f.Add([]byte("1 o {}\n2 e {"))
	f.Add([]byte("-1 o x\n+2 e y\n 3 o z\n"))
	f.Add([]byte("99999999999999999999 o {}\n"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte("4 e  \n4 o \n4\n4 \n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := storagetest.NewMemory()
		st := NewStore(mem, "mg")
		_ = mem.Store(context.Background(), "mg/b/results/000000/w-1", data)
		whole := map[string]bool{}
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			for _, l := range strings.Split(string(data[:i]), "\n") {
				whole[l] = true
			}
		}
		n := 0
		err := st.readCheckpoints(context.Background(), "mg/b", 0, func(idx int, ok bool, line []byte) {
			n++
			kind := "e"
			if ok {
				kind = "o"
			}
			if len(line) == 0 || bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("reported line %q", line)
			}
			// The record is a whole line of the data whose number parses.
			found := false
			for l := range whole {
				num, ok := strings.CutSuffix(l, " "+kind+" "+string(line))
				if !ok || strings.Contains(num, " ") {
					continue
				}
				if v, err := strconv.Atoi(num); err == nil && v == idx {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("reported %d %s %q, which is no whole record of %q", idx, kind, line, data)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if n > bytes.Count(data, []byte{'\n'}) {
			t.Fatalf("%d records from %d lines", n, bytes.Count(data, []byte{'\n'}))
		}
	})
}

// TestFinishDedupes: a request with results in two checkpoints (two
// runners finished it, or one did twice around a crash) gets one line,
// the first; a torn record is skipped.
func TestFinishDedupes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := storagetest.NewMemory()
	st := NewStore(mem, "mg")
	b, want := chatBatch(t, st, "r", "ok", 10)
	rec, err := st.batchRecord(ctx, testOwner, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.validate(ctx, rec, newFakeExecutor(), testSettings(), nil)
	if err != nil || len(v.errors) > 0 {
		t.Fatal(err, v.errors)
	}
	// Every part done, by two writers that overlap.
	dir := st.batchDir(testOwner, b.ID)
	okLine := func(i int, from string) string {
		return string(responseLine(b.ID, i, strconv.Quote(want[i]), Response{Status: 200, RequestID: from, Body: []byte(`{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)}))
	}
	var first, second [2]strings.Builder
	for i := range 10 {
		p := i / 7
		fmt.Fprintf(&first[p], "%d o %s\n", i, okLine(i, "first"))
		if i%3 == 0 {
			fmt.Fprintf(&second[p], "%d e %s\n", i, errorLine(b.ID, i, strconv.Quote(want[i]), "x", "second"))
		}
	}
	second[1].WriteString("9 e {\"torn\":")
	for p := range 2 {
		_ = mem.Store(ctx, path.Join(dir, "results", fmt.Sprintf("%06d", p), "a-000000001"), []byte(first[p].String()))
		_ = mem.Store(ctx, path.Join(dir, "results", fmt.Sprintf("%06d", p), "b-000000001"), []byte(second[p].String()))
	}
	parts := slices.Clone(v.parts)
	for i := range parts {
		parts[i].Done = true
	}
	if err := st.storeJSON(ctx, st.claimsKey(rec), &claims{Parts: parts}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	rec.Status, rec.InProgressAt, rec.RequestCounts.Total = StatusInProgress, &now, 10
	if err := st.storeJSON(ctx, path.Join(dir, "batch.json"), rec); err != nil {
		t.Fatal(err)
	}

	ex := newFakeExecutor()
	startRunner(t, st, "inst-a", staticLive(testSettings(), ex))
	b = waitStatus(t, st, b.ID, StatusCompleted)
	if ex.totalCalls() != 0 {
		t.Errorf("%d requests sent for a batch whose parts were done", ex.totalCalls())
	}
	if b.ErrorFileID != nil || b.RequestCounts != (RequestCounts{Total: 10, Completed: 10}) {
		t.Errorf("error file %v, request_counts %+v", b.ErrorFileID, b.RequestCounts)
	}
	if b.Usage == nil || b.Usage.InputTokens != 10 || b.Usage.OutputTokens != 20 || b.Usage.TotalTokens != 30 {
		t.Errorf("usage %+v", b.Usage)
	}
	out := readResultFile(t, st, b.OutputFileID)
	checkExactlyOnce(t, want, out)
	for _, l := range out {
		if l.Response == nil || l.Response.RequestID != "first" {
			t.Errorf("line %s is not the first result", l.raw)
		}
	}
	checkCleanedUp(t, mem, st, b.ID)
}

func TestResponseLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want string // the body as written
	}{
		{"compact", `{"a":1}`, `{"a":1}`},
		{"pretty", "{\n  \"a\": [1,\n 2],\n  \"s\": \"x\\ny\"\n}\n", `{"a":[1,2],"s":"x\ny"}`},
		{"empty", "", `null`},
		{"blank", " \n", `null`},
		{"not JSON", "<html>bad gateway</html>", `null`},
		{"two values", `{}{}`, `null`},
		{"strings kept whole", "{ \"a b\" :\t\"x \\\" y\\\\\" ,\r\n \"c\": [ \"\\\\\", 2.5e3 , true ] }", `{"a b":"x \" y\\","c":["\\",2.5e3,true]}`},
		{"a string alone", ` "s  t" `, `"s  t"`},
	} {
		line := responseLine("batch_x", 3, `"c\"1"`, Response{Status: 502, RequestID: "r\"q", Body: []byte(tc.body)})
		if bytes.IndexByte(line, '\n') >= 0 || !json.Valid(line) {
			t.Errorf("%s: line %s is no JSONL line", tc.name, line)
			continue
		}
		g := gjson.ParseBytes(line)
		if g.Get("id").Str != requestID("batch_x", 3) || g.Get("custom_id").Str != `c"1` ||
			g.Get("response.status_code").Int() != 502 || g.Get("response.request_id").Str != `r"q` ||
			g.Get("response.body").Raw != tc.want || g.Get("error").Type != gjson.Null || !g.Get("error").Exists() {
			t.Errorf("%s: line %s", tc.name, line)
		}
	}
	line := errorLine("batch_x", 4, `"c4"`, "batch_expired", `it "expired"`)
	g := gjson.ParseBytes(line)
	if !json.Valid(line) || g.Get("response").Type != gjson.Null || !g.Get("response").Exists() ||
		g.Get("error.code").Str != "batch_expired" || g.Get("error.message").Str != `it "expired"` || g.Get("custom_id").Str != "c4" {
		t.Errorf("errorLine: %s", line)
	}
	if id, again := requestID("batch_x", 4), requestID("batch_x", 4); id == requestID("batch_x", 3) || id != again {
		t.Error("requestID is not a stable function of batch and index")
	}
}

// FuzzResponseLineBody holds the answer's body in a result line to
// json.Compact's output wherever that succeeds, and the line to one valid
// JSON line whatever the body.
func FuzzResponseLineBody(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "{\n \"a\" : [1, \"x\\\"\\\\\"]\n}", "", " ", `"\\"`, `{"a":"\u00e9"}`, `[1,2`, `{}{}`, "\"a\nb\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		line := responseLine("batch_x", 1, `"c"`, Response{Status: 200, Body: body})
		if bytes.ContainsAny(line, "\r\n") || !json.Valid(line) {
			t.Fatalf("body %q: line %q is no JSONL line", body, line)
		}
		got := gjson.GetBytes(line, "response.body").Raw
		var want bytes.Buffer
		if json.Compact(&want, body) != nil {
			if got != "null" {
				t.Fatalf("body %q, not JSON: written as %q", body, got)
			}
			return
		}
		if got != want.String() {
			t.Fatalf("body %q: written as %q, json.Compact gives %q", body, got, want.String())
		}
	})
}

func TestLineUsage(t *testing.T) {
	line := `{"response":{"body":{"usage":{"prompt_tokens":10,"completion_tokens":4,"total_tokens":14,` +
		`"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}}}}`
	want := Usage{InputTokens: 10, InputTokensDetails: CachedTokens{3}, OutputTokens: 4, OutputTokensDetails: ReasonTokens{2}, TotalTokens: 14}
	if got := lineUsage([]byte(line)); got != want {
		t.Errorf("lineUsage = %+v, want %+v", got, want)
	}
	if got := lineUsage([]byte(`{"response":{"body":{"results":[]}}}`)); got != (Usage{}) {
		t.Errorf("lineUsage without usage = %+v", got)
	}
}

func TestBackoff(t *testing.T) {
	if got := backoff(time.Second, 3, 1500*time.Millisecond); got != 1500*time.Millisecond {
		t.Errorf("retry-after 1.5s gives %v", got)
	}
	if got := backoff(time.Second, 0, time.Hour); got != 5*time.Minute {
		t.Errorf("retry-after 1h gives %v, want the 5m cap", got)
	}
	for attempt := range 10 {
		d := min(time.Second<<min(attempt, 6), time.Minute)
		for range 50 {
			if got := backoff(time.Second, attempt, 0); got < d/2 || got > d {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}

func TestSettingsWithDefaults(t *testing.T) {
	defaults := DefaultSettings()
	defaults.MaxRetries = 0
	if got := (Settings{}).withDefaults(); got != defaults {
		t.Errorf("zero settings: %+v", got)
	}
	neg := Settings{Workers: -1, PerProvider: -1, MaxRequests: -1, MaxLineBytes: -1, MaxRetries: -1, RetryBackoff: -1,
		CheckpointInterval: -1, PartLines: -1, Lease: -1, NativePoll: -1, NativePollMax: -1, NativeCancelWait: -1, NativeSubmitTimeout: -1}
	if got := neg.withDefaults(); got != defaults {
		t.Errorf("negative settings: %+v", got)
	}
	s := Settings{Workers: 1, PerProvider: 2, MaxRequests: 3, MaxLineBytes: 4, MaxRetries: -1, RetryBackoff: 5,
		CheckpointInterval: 6, PartLines: 7, Lease: 8, NativePoll: 9, NativePollMax: 10, NativeCancelWait: 11, NativeSubmitTimeout: 12}
	want := s
	want.MaxRetries = 0
	if got := s.withDefaults(); got != want {
		t.Errorf("set settings: %+v, want %+v", got, want)
	}
}

func TestLeasedByOther(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	me := "inst-a/aaaa"
	for _, tc := range []struct {
		holder string
		until  int64
		want   bool
	}{
		{"", 2_000_000, false},
		{me, 2_000_000, false},
		{"inst-a/bbbb", 2_000_000, false}, // an earlier process of this instance
		{"inst-b/bbbb", 2_000_000, true},
		{"inst-b/bbbb", 1_000_000, true}, // until the lease's last millisecond
		{"inst-b/bbbb", 999_999, false},  // run out
		{"inst-ab/bbbb", 2_000_000, true},
		{"inst", 2_000_000, true},
	} {
		p := partState{Holder: tc.holder, Until: tc.until}
		if got := p.leasedByOther(me, now); got != tc.want {
			t.Errorf("holder %q until %d: %v, want %v", tc.holder, tc.until, got, tc.want)
		}
	}
}

func TestSafeName(t *testing.T) {
	if got := safeName("inst a/ü-1_Z"); got != "inst_a___-1_Z" {
		t.Errorf("safeName = %q", got)
	}
}

// BenchmarkResponseLine writes the result line of a chat answer, as the
// provider sent it: compact (most), and pretty-printed.
func BenchmarkResponseLine(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"The image shows a wooden boardwalk path running through a lush green field or meadow. The sky is bright blue with some scattered clouds, giving the scene a serene and peaceful atmosphere.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, answer, "", "  "); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{{"compact", answer}, {"pretty", pretty.Bytes()}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				responseLine("batch_x", 12345, `"request-12345"`, Response{Status: 200, RequestID: "req_1", Body: tc.body})
			}
		})
	}
}
