package responses

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers"
)

// A stored Response replayed as a stream passes every check of a
// Responses stream (openai-go decodes each event; items added, done and
// final agree), ends with the Response as stored, and its deltas add up
// to the items' text, summaries, arguments and input.
func TestReplay(t *testing.T) {
	files, _ := filepath.Glob(responseDir + "/*.response.json")
	more, _ := filepath.Glob("testdata/replay/*.json")
	files = append(files, more...)
	if len(files) < 5 {
		t.Fatal("no answers")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".json"), ".response"), func(t *testing.T) {
			stored, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Replay(nil, stored)
			if err != nil {
				t.Fatal(err)
			}
			events, final := checkEvents(t, out)
			last := gjson.GetBytes(events[len(events)-1].data, "response").Raw
			if last != providers.CompactJSON(string(stored)) {
				t.Fatalf("the terminal Response is not the stored one:\n%s", last)
			}
			if final.ID != gjson.GetBytes(stored, "id").Str {
				t.Fatalf("id %s", final.ID)
			}
			created := gjson.GetBytes(events[0].data, "response")
			if created.Get("status").Str != "in_progress" || created.Get("output").Raw != "[]" || created.Get("usage").Type != gjson.Null ||
				created.Get("id").Str != final.ID || created.Get("instructions").Raw != gjson.GetBytes(stored, "instructions").Raw {
				t.Fatalf("response.created: %s", created.Raw)
			}
			// The deltas rebuild every item's content.
			deltas := map[string]string{}
			for _, ev := range events {
				d := gjson.GetBytes(ev.data, "delta")
				if !d.Exists() {
					continue
				}
				k := gjson.GetBytes(ev.data, "item_id").Str + "/" + strings.TrimSuffix(ev.name, ".delta") + "/" +
					gjson.GetBytes(ev.data, "content_index").Raw + gjson.GetBytes(ev.data, "summary_index").Raw
				deltas[k] += d.Str
			}
			gjson.GetBytes(stored, "output").ForEach(func(_, it gjson.Result) bool {
				id := it.Get("id").Str
				check := func(k, want string) {
					if deltas[id+"/"+k] != want {
						t.Errorf("%s %s: deltas %q, want %q", id, k, deltas[id+"/"+k], want)
					}
				}
				switch it.Get("type").Str {
				case "message":
					for j, p := range it.Get("content").Array() {
						if p.Get("type").Str == "refusal" {
							check("response.refusal/"+strconv.Itoa(j), p.Get("refusal").Str)
						} else {
							check("response.output_text/"+strconv.Itoa(j), p.Get("text").Str)
						}
					}
				case "reasoning":
					for j, p := range it.Get("summary").Array() {
						check("response.reasoning_summary_text/"+strconv.Itoa(j), p.Get("text").Str)
					}
				case "function_call":
					check("response.function_call_arguments/", it.Get("arguments").Str)
				case "custom_tool_call":
					check("response.custom_tool_call_input/", it.Get("input").Str)
				}
				return true
			})
		})
	}
}

func TestReplayRefuses(t *testing.T) {
	for _, bad := range []string{``, `{}`, `[]`,
		`{"object":"response","status":"failed","output":[]}`,
		`{"object":"response","status":"in_progress","output":[]}`,
		`{"object":"response","status":"completed","output":{}}`,
		`{"object":"chat.completion","status":"completed","output":[]}`} {
		if out, err := Replay([]byte("x"), []byte(bad)); err == nil || string(out) != "x" {
			t.Errorf("%q: %q, %v", bad, out, err)
		}
	}
}
