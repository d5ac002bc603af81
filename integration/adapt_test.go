package integration

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the caddyfile adapter
	"github.com/caddyserver/caddy/v2/caddytest"
)

var updateGolden = flag.Bool("update", false, "rewrite golden files from the current output")

// TestCaddyfileAdapt runs every ../testdata/caddyfile_adapt/*.caddyfiletest:
// a Caddyfile, a line "----------", and either the adapted JSON (when it
// starts with "{") or the text the adapt error must contain.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("../testdata/caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no adapt cases found: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".caddyfiletest"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			input, want, ok := strings.Cut(string(data), "\n----------\n")
			if !ok {
				t.Fatalf("%s: no ---------- separator", f)
			}
			want = strings.TrimSpace(want)
			if !strings.HasPrefix(want, "{") {
				_, _, err := adaptCaddyfile(input)
				if err == nil {
					t.Fatalf("adapting succeeded; want an error containing %q", want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("adapt error %q does not contain %q", err, want)
				}
				return
			}
			if *updateGolden {
				out, _, err := adaptCaddyfile(input)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte(input+"\n----------\n"+string(out)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !caddytest.CompareAdapt(t, f, input, "caddyfile", want) {
				t.Errorf("%s: the adapted JSON differs from the file's (the diff is on stdout)", f)
			}
		})
	}
}

func adaptCaddyfile(input string) ([]byte, []caddyconfig.Warning, error) {
	a := caddyconfig.GetAdapter("caddyfile")
	out, warn, err := a.Adapt([]byte(input), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		return nil, warn, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "\t"); err != nil {
		return nil, warn, err
	}
	return buf.Bytes(), warn, nil
}
