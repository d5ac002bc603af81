package responses

import (
	"strings"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// TestRelay passes a Responses stream through as it is, however the
// provider's writes cut it, reading its usage from the terminal event and
// its id for onID; a stream closed before its terminal event gets the
// API's error event.
func TestRelay(t *testing.T) {
	const created = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n"
	const delta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"a\"}\n\n"
	const completed = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"usage\":{\"input_tokens\":12,\"input_tokens_details\":{\"cached_tokens\":5},\"output_tokens\":9,\"output_tokens_details\":{\"reasoning_tokens\":3}}}}\n\n"
	whole := providers.Used{Prompt: 12, Cached: 5, Completion: 9, Reasoning: 3, Known: true}
	for _, tc := range []struct {
		name, stream, wantError string
		usage                   providers.Used
		id                      string
	}{
		{"whole", created + delta + completed, "", whole, "resp_1"},
		{"ended, no event names", "data: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_2\"}}\n\n", "", providers.Used{}, "resp_2"},
		{"ended by failing", delta + "event: response.failed\ndata: {\"type\":\"response.failed\"}\n\n", "", providers.Used{}, ""},
		{"cut", created + delta, "event: error\ndata: {\"type\":\"error\",\"code\":\"stream_incomplete\"", providers.Used{}, "resp_1"},
	} {
		for cut := range len(tc.stream) {
			for _, tellID := range []bool{false, true} {
				var ids []string
				var onID func(string)
				if tellID {
					onID = func(id string) { ids = append(ids, id) }
				}
				r := NewRelay(onID)
				got := translatortest.RelayWrites(r, tc.stream[:cut], tc.stream[cut:])
				rest, ok := strings.CutPrefix(got, strings.TrimRight(tc.stream, "\n"))
				rest = strings.TrimLeft(rest, "\n")
				if !ok || tc.wantError == "" && rest != "" || tc.wantError != "" && (!strings.Contains(rest, tc.wantError) || strings.Count(rest, "\n\n") != 1) {
					t.Fatalf("%s, cut at %d: the client got %q after the stream, want %q", tc.name, cut, rest, tc.wantError)
				}
				if r.Usage() != tc.usage {
					t.Fatalf("%s, cut at %d: usage %+v, want %+v", tc.name, cut, r.Usage(), tc.usage)
				}
				if wantIDs := map[bool]int{true: 1}[tellID && tc.id != ""]; len(ids) != wantIDs || wantIDs == 1 && ids[0] != tc.id {
					t.Fatalf("%s, cut at %d: onID told %q, want %q", tc.name, cut, ids, tc.id)
				}
			}
		}
	}
}

// TestAnswerUsage reads a Response's usage.
func TestAnswerUsage(t *testing.T) {
	got := AnswerUsage([]byte(`{"id":"resp_1","usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":5,"cache_write_tokens":2},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":21}}`))
	if want := (providers.Used{Prompt: 12, Cached: 5, Completion: 9, Reasoning: 3, Known: true}); got != want {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	if got := AnswerUsage([]byte(`{"id":"resp_1","usage":null}`)); got.Known {
		t.Errorf("a Response without usage: %+v", got)
	}
}
