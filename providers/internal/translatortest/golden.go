// Package translatortest is the test harness modelgate's own provider
// translators share: golden files (with the -update flag), stream
// transcripts replayed in pieces of every size, benchmark bodies. The
// checks every unified stream passes, the OpenAI SDK's accumulation of a
// stream and the fuzz loops are package providerkit's, the exported kit
// that provider modules outside this repository run too.
//
// Only tests import it. It registers the -update flag, so a test package
// that imports it must not define its own.
package translatortest

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/jsonw"
	"github.com/modelgate/modelgate/providers/providerkit"
)

var update = flag.Bool("update", false, "rewrite golden files and transcripts from the current output")

// Update reports whether the tests run with -update: golden files are
// rewritten from the current output instead of compared with it.
func Update() bool { return *update }

// Now is the clock the translators' tests run with: the goldens' and
// transcripts' "created" is its time, 1750000000.
func Now() time.Time { return time.Unix(1750000000, 0) }

// ReadFile returns the contents of path or fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// WriteFile writes data to path (under -update) or fails the test.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ReadOptional returns the contents of path, or nil when it does not exist.
func ReadOptional(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Canonical decodes JSON for comparison regardless of layout and key order.
// name says in a failure whose JSON it is.
func Canonical(t testing.TB, name string, data []byte) any {
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

// Indent pretty-prints JSON for golden files and failure messages.
func Indent(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, data, "", "  "); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, data)
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// CheckGolden checks that got is valid JSON and compares it with the
// golden file at path as canonical JSON, or rewrites the file under
// -update.
func CheckGolden(t testing.TB, path string, got []byte) {
	t.Helper()
	if !json.Valid(got) {
		t.Fatalf("output for %s is not valid JSON:\n%s", path, got)
	}
	if *update {
		WriteFile(t, path, Indent(t, got))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !reflect.DeepEqual(Canonical(t, "got", got), Canonical(t, path, want)) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, Indent(t, got), want)
	}
}

// GoldenCases lists the case names in dir that have a file ending in
// suffix; it fails when there are none.
func GoldenCases(t testing.TB, dir, suffix string) []string {
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

// Golden runs one subtest for each file <name><in> in dir: translate makes
// the output of its contents, which must equal the golden file
// <name><out> in dir (see CheckGolden). translate fails the subtest itself
// when it cannot translate.
func Golden(t *testing.T, dir, in, out string, translate func(t *testing.T, name string, input []byte) []byte) {
	t.Helper()
	for _, name := range GoldenCases(t, dir, in) {
		t.Run(name, func(t *testing.T) {
			got := translate(t, name, ReadFile(t, filepath.Join(dir, name+in)))
			CheckGolden(t, filepath.Join(dir, name+out), got)
		})
	}
}

// ChatResponseGolden runs Golden over the provider's answers <name><in>
// in dir: response, a translator's ChatResponse, makes of each the
// unified answer <name>.unified.json, and returns the usage it carries.
func ChatResponseGolden(t *testing.T, dir, in string, response func(body []byte) ([]byte, providers.Used, error)) {
	t.Helper()
	Golden(t, dir, in, ".unified.json", func(t *testing.T, _ string, body []byte) []byte {
		got, used, err := response(body)
		if err != nil {
			t.Fatalf("ChatResponse: %v", err)
		}
		providerkit.CheckAnswerUsage(t, got, used)
		return got
	})
}

// RequestsJSON writes the requests a translator made, for a golden file:
// a JSON array of {"path", "body"}. It fails when a body is not JSON.
func RequestsJSON(t testing.TB, reqs []providers.Request) []byte {
	t.Helper()
	w := jsonw.New(nil)
	a := w.Array()
	for i, r := range reqs {
		if !json.Valid(r.Body) {
			t.Fatalf("request %d is not JSON: %s", i, r.Body)
		}
		o := a.Object()
		o.Str("path", r.Path)
		o.Raw("body", string(r.Body))
		o.End()
	}
	a.End()
	b, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SeedFiles adds the contents of every file in dir ending in suffix to
// f's seed corpus; it fails when there are none.
func SeedFiles(f *testing.F, dir, suffix string) {
	f.Helper()
	for _, name := range GoldenCases(f, dir, suffix) {
		f.Add(ReadFile(f, filepath.Join(dir, name+suffix)))
	}
}
