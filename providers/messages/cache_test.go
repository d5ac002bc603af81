package messages

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/internal/translatortest"
)

// Every prompt caching marker of a Messages request reaches Anthropic
// through the hub (a Messages request to a Claude behind the chat
// translator: Claude on Vertex, say) on the same block: a system text, a
// user text or image, a tool_result, a tool_use, a tool, and the request's
// own (the top level).
func TestCacheControlReachesAnthropic(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(requestDir, "*.messages.json"))
	files = append(files, "testdata/cache_control.messages.json")
	marked := 0
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".messages.json"), func(t *testing.T) {
			in := translatortest.ReadFile(t, f)
			hub, err := ToChat(in)
			if err != nil {
				t.Fatal(err)
			}
			req, err := anthropic.Chat{}.ChatRequest(hub, "claude-sonnet-4-5")
			if err != nil && strings.Contains(err.Error(), "not supported") {
				t.Skipf("Anthropic's chat translator takes no such request: %v", err)
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, hub)
			}
			want, got := markers(gjson.ParseBytes(in), ""), markers(gjson.ParseBytes(req.Body), "")
			if !slices.Equal(want, got) {
				t.Errorf("cache_control markers\n got %q\nwant %q\nhub: %s", got, want, hub)
			}
			marked += len(want)
		})
	}
	if marked < 8 {
		t.Fatalf("only %d markers in the fixtures", marked)
	}
}

// markers lists the blocks of an Anthropic request v carries
// cache_control on, each named by its text, id, tool_use_id or name (or
// its type; a plain-text document by its text), with the marker's ttl,
// sorted.
func markers(v gjson.Result, path string) []string {
	var out []string
	if v.IsObject() {
		if cc := v.Get("cache_control"); cc.IsObject() {
			name := path
			if d := v.Get("source"); v.Get("type").Str == "document" && d.Get("type").Str == "text" {
				name = "text:" + d.Get("data").Str // a plain-text document becomes its text
			} else {
				for _, k := range []string{"text", "tool_use_id", "id", "name", "type"} {
					if s := v.Get(k).Str; s != "" && path != "" {
						name = k + ":" + s
						break
					}
				}
			}
			out = append(out, name+" ttl:"+cc.Get("ttl").Str)
		}
		v.ForEach(func(k, x gjson.Result) bool {
			out = append(out, markers(x, path+"/"+k.Str)...)
			return true
		})
	} else if v.IsArray() {
		v.ForEach(func(_, x gjson.Result) bool {
			out = append(out, markers(x, path+"/")...)
			return true
		})
	}
	if path == "" {
		slices.Sort(out)
	}
	return out
}
