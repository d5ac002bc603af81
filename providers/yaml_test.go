package providers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"go.yaml.in/yaml/v3"
)

// yamlFields parses a YAML mapping back into its key/value pairs, in order.
func yamlFields(t testing.TB, doc string) [][2]string {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &n); err != nil {
		t.Fatalf("%q does not parse: %v", doc, err)
	}
	m := n.Content[0]
	if m.Kind != yaml.MappingNode {
		t.Fatalf("%q is not a mapping", doc)
	}
	var out [][2]string
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Tag != "!!str" || v.Tag != "!!str" {
			t.Fatalf("%q: %q (%s) → %q (%s) is not a string pair", doc, k.Value, k.Tag, v.Value, v.Tag)
		}
		out = append(out, [2]string{k.Value, v.Value})
	}
	return out
}

func jsonFields(obj gjson.Result) [][2]string {
	var out [][2]string
	obj.ForEach(func(k, v gjson.Result) bool {
		out = append(out, [2]string{k.Str, v.Str})
		return true
	})
	return out
}

// TestYAMLDocumentGolden: each testdata/rerank/yaml/<case>.json becomes
// exactly <case>.yaml, which parses back to the same fields in order.
func TestYAMLDocumentGolden(t *testing.T) {
	files, _ := filepath.Glob("../testdata/rerank/yaml/*.json")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			in, _ := os.ReadFile(f)
			want, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".yaml")
			if err != nil {
				t.Fatal(err)
			}
			obj := gjson.ParseBytes(in)
			got := string(AppendYAMLDocument(nil, obj))
			if got != string(want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
			if a, b := yamlFields(t, got), jsonFields(obj); len(a) != len(b) || strings.Join(flat(a), "\x00") != strings.Join(flat(b), "\x00") {
				t.Errorf("round trip %q, want %q", a, b)
			}
		})
	}
}

func flat(pairs [][2]string) []string {
	var out []string
	for _, p := range pairs {
		out = append(out, p[0], p[1])
	}
	return out
}

func FuzzYAMLDocument(f *testing.F) {
	for _, s := range []string{"plain", "a: b", "- x", "yes", "No", "1e3", ".inf", "\n", "\x00", "é", "#x", "'q'", "\"", "\u2028", "\x85", "\uffff", "a\ufffeb", "?", "&a", "*b", "!t", "%p", "@", "`", "{", "[", "|", ">", "key:", "x #y", " lead", "trail "} {
		f.Add("k", s)
		f.Add(s, "v")
	}
	f.Fuzz(func(t *testing.T, k, v string) {
		if !utf8Valid(k) || !utf8Valid(v) || k == v {
			return // JSON strings are valid UTF-8; equal keys are one field
		}
		obj := gjson.Parse(string(AppendString(append(AppendString([]byte("{"), k), ':'), v)) + `,"z_second":"end"}`)
		if k == "z_second" {
			return
		}
		doc := string(AppendYAMLDocument(nil, obj))
		got := yamlFields(t, doc)
		want := jsonFields(obj)
		if strings.Join(flat(got), "\x00") != strings.Join(flat(want), "\x00") {
			t.Fatalf("%q round-trips to %q, want %q", doc, got, want)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }
