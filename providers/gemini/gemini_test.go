package gemini

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/providers"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output")

const (
	requestDir  = "../../testdata/providers/gemini"
	responseDir = "../../testdata/providers/gemini/response"

	// testModel is the provider's model name the golden requests are
	// translated for; the unified inputs use the gateway alias "my-gemini".
	testModel = "gemini-3-flash-preview"
)

// fixedNow is the clock the tests give Chat.
func fixedNow() time.Time { return time.Unix(1750000000, 0) }

// seqIDs returns an id generator that counts: 000…001, 000…002, …, so
// that translations are reproducible and two translations of the same
// answer (streamed and not) make the same ids.
func seqIDs() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("%024d", n)
	}
}

// testChat returns the Chat the tests use, with a fresh id sequence.
func testChat() Chat { return Chat{Now: fixedNow, newID: seqIDs()} }

// canonical decodes JSON for comparison regardless of layout and key order.
func canonical(t testing.TB, name string, data []byte) any {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: invalid JSON: %v\n%s", name, err, data)
	}
	if d.More() {
		t.Fatalf("%s: trailing data after the JSON value", name)
	}
	return v
}

// indent pretty-prints JSON for golden files and failure messages.
func indent(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, data)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// checkGolden compares got with the golden file as canonical JSON, or
// rewrites the file under -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, indent(t, got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !reflect.DeepEqual(canonical(t, "got", got), canonical(t, path, want)) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, indent(t, got), want)
	}
}

// goldenCases lists the case names in dir that have a file ending in suffix.
func goldenCases(t testing.TB, dir, suffix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"+suffix))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no %s files in %s", suffix, dir)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), suffix)
	}
	return names
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestChatRequestGolden(t *testing.T) {
	for _, name := range goldenCases(t, requestDir, ".unified.json") {
		t.Run(name, func(t *testing.T) {
			in := readFile(t, filepath.Join(requestDir, name+".unified.json"))
			info, err := providers.ValidateChat(in)
			if err != nil {
				t.Fatalf("the input does not pass ValidateChat: %v", err)
			}
			req, err := testChat().ChatRequest(in, testModel)
			if err != nil {
				t.Fatalf("ChatRequest: %v", err)
			}
			wantPath, wantQuery := "/models/"+testModel+":generateContent", ""
			if info.Stream {
				wantPath, wantQuery = "/models/"+testModel+":streamGenerateContent", "alt=sse"
			}
			if req.Path != wantPath || req.Query != wantQuery || req.Header != nil || req.Framing != Framing {
				t.Errorf("Path %q, Query %q, Header %v; want %q, %q, none, and Gemini's framing", req.Path, req.Query, req.Header, wantPath, wantQuery)
			}
			checkGolden(t, filepath.Join(requestDir, name+".gemini.json"), req.Body)
		})
	}
}

func TestChatResponseGolden(t *testing.T) {
	for _, name := range goldenCases(t, responseDir, ".gemini.json") {
		t.Run(name, func(t *testing.T) {
			in := readFile(t, filepath.Join(responseDir, name+".gemini.json"))
			got, err := testChat().ChatResponse(in)
			if err != nil {
				t.Fatalf("ChatResponse: %v", err)
			}
			checkGolden(t, filepath.Join(responseDir, name+".unified.json"), got)
		})
	}
}
