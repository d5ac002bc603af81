package modelgate_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// outsideReference is one kind of citation the repository must not hold:
// code, comments, tests and docs cite only what a reader of the repository
// can open.
type outsideReference struct {
	re   *regexp.Regexp
	what string
}

// outsideReferences are the citations TestNoOutsideReferences refuses:
// documents kept outside the repository, the directory they are kept in,
// and issue numbers of a tracker the repository does not hold. Links to
// public trackers (go.dev/issue/N, …/issues/N) are not numbers in prose
// and pass.
var outsideReferences = []outsideReference{
	{regexp.MustCompile(`\bDESIGN\.md\b`), "a design document outside the repository (cite docs/design/ instead)"},
	{regexp.MustCompile(`\bWIRE_FORMATS\b`), "a wire-format reference outside the repository (cite the provider's own documentation or SDK)"},
	{regexp.MustCompile(`\bSTYLE\.md\b|\bSTYLE §`), "a style guide outside the repository"},
	{regexp.MustCompile(`\bSECRET_SCANNING\.md\b`), "a secret-scanning reference outside the repository (cite docs/ instead)"},
	{regexp.MustCompile(`\.\./shared\b`), "a directory outside the repository"},
	{regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`), "an issue number (say what the change does instead)"},
}

// TestNoOutsideReferences reads every Go, Markdown and shell file and
// every Caddyfile of the repository (but .tmp/ and other hidden
// directories, testdata/ and vendored code) and fails on each citation of
// outsideReferences, by file and line.
func TestNoOutsideReferences(t *testing.T) {
	files, err := hygieneFiles(".")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "docs_test.go") || !slices.Contains(files, "docs/README.md") {
		t.Fatalf("found %d files without docs_test.go and docs/README.md: run the test from the repository root", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, hit := range findOutsideReferences(string(data)) {
			t.Errorf("%s:%d: %q: %s", f, hit.line, hit.text, hit.what)
		}
	}
}

// TestOutsideReferenceChecker shows that the check catches what it must
// and lets links to public trackers and ordinary prose through. The
// citations are put together here so that this file holds none.
func TestOutsideReferenceChecker(t *testing.T) {
	for _, tc := range []struct {
		text string
		hits int
	}{
		{"// See " + "DESIGN" + ".md §2a.", 1},
		{"// (" + "WIRE_" + "FORMATS" + " §C.2)", 1},
		{"// (" + "WIRE_" + "FORMATS" + ".md A.0)", 1},
		{"// " + "STYLE" + ".md §8, and " + "STYLE" + " §6", 2},
		{"// per " + "SECRET_SCANNING" + ".md", 1},
		{"// in .." + "/shared/reference", 1},
		{"// (" + "issue" + " 15 point 2)", 1},
		{"// fixes " + "Issue" + " #34", 1},
		{"// as " + "issues" + " 3 and 4 ask", 1},
		{"first line\n// two: " + "issue" + " 1, " + "DESIGN" + ".md", 2},
		{"// the fuzz coordinator's race (go.dev/issue/75804)", 0},
		{"// https://github.com/caddyserver/caddy/issues/6000", 0},
		{"// an issue with 3 providers; docs/design/routing.md", 0},
		{"// the design is in docs/design/; the shared state", 0},
	} {
		if got := findOutsideReferences(tc.text); len(got) != tc.hits {
			t.Errorf("%q: %d citations %v, want %d", tc.text, len(got), got, tc.hits)
		}
	}
	hits := findOutsideReferences("a\nb\n// " + "issue" + " 7\n")
	if len(hits) != 1 || hits[0].line != 3 {
		t.Errorf("hits %v, want one on line 3", hits)
	}
}

// outsideHit is a citation found on a line.
type outsideHit struct {
	line int
	text string
	what string
}

// findOutsideReferences returns the citations of outsideReferences in
// text, line by line.
func findOutsideReferences(text string) []outsideHit {
	var hits []outsideHit
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		for _, r := range outsideReferences {
			for _, m := range r.re.FindAllString(sc.Text(), -1) {
				hits = append(hits, outsideHit{line: n, text: m, what: r.what})
			}
		}
	}
	return hits
}

// hygieneFiles returns the files under root that TestNoOutsideReferences
// reads, slash-separated and relative to root: Go, Markdown and shell
// files and Caddyfiles, outside hidden directories (.git, .tmp, …),
// testdata and vendored code.
func hygieneFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(name, ".go"), strings.HasSuffix(name, ".md"), strings.HasSuffix(name, ".sh"),
			name == "Caddyfile", strings.HasSuffix(name, ".Caddyfile"):
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}
