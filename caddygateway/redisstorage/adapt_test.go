package redisstorage_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // the caddyfile adapter

	_ "github.com/modelgate/modelgate/caddygateway" // the modelgate app's storage option
	_ "github.com/modelgate/modelgate/caddygateway/redisstorage"
)

var update = flag.Bool("update", false, "rewrite the golden JSON from the current output")

// TestCaddyfileAdapt runs testdata/*.caddyfiletest: a Caddyfile, a line
// "----------", and the adapted JSON (when it starts with "{") or the text
// the adapt error must contain.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".caddyfiletest"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(data), "\n----------\n")
			if !ok {
				t.Fatal("no ---------- separator")
			}
			want = strings.TrimSpace(want)
			got, err := adapt(input + "\n")
			if want != "" && !strings.HasPrefix(want, "{") {
				if err == nil {
					t.Fatalf("adapting succeeded; want an error containing %q", want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(f, []byte(input+"\n----------\n"+got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Fatalf("adapted JSON differs (run with -update to accept):\n%s", got)
			}
		})
	}
}

func adapt(input string) (string, error) {
	out, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return "", err
	}
	if len(warn) > 0 {
		return "", &warnings{warn}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		return "", err
	}
	return buf.String(), nil
}

type warnings struct{ w []caddyconfig.Warning }

func (w *warnings) Error() string {
	var parts []string
	for _, x := range w.w {
		parts = append(parts, x.String())
	}
	return "warnings: " + strings.Join(parts, "; ")
}
