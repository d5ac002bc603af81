package modelgate_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is how long README.md may grow: it is the entrance, and
// the reference lives under docs/.
const readmeMaxLines = 300

// pendingPages are pages the docs link to that another change adds. A link
// to one is accepted while the page does not exist; once it does, its
// anchors are checked like any other page's.
var pendingPages = map[string]bool{}

// TestReadmeLength keeps README.md an entrance of at most readmeMaxLines
// lines.
func TestReadmeLength(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material to docs/", n, readmeMaxLines)
	}
}

// TestDocsLinks checks every relative link of the repository's Markdown —
// README.md, the other top-level pages and docs/ — against the files and
// heading anchors that exist, so that a moved or renamed page or heading
// cannot leave a dead link behind.
func TestDocsLinks(t *testing.T) {
	files, err := markdownFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found only %v: run the test from the repository root", files)
	}
	docs := map[string]*mdDoc{}
	for _, f := range files {
		d, err := parseMarkdown(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = d
	}
	for _, f := range files {
		for _, l := range docs[f].links {
			if msg := checkLink(f, l.target, docs); msg != "" {
				t.Errorf("%s:%d: link %q: %s", f, l.line, l.target, msg)
			}
		}
	}
}

// TestDocsLinkChecker shows that the link check fails on what it must
// catch: a missing file, a missing anchor, a second heading's suffix.
func TestDocsLinkChecker(t *testing.T) {
	doc := parseMarkdownText("a.md", strings.Join([]string{
		"# Global option `modelgate`",
		"## Limits, budgets and usage",
		"## Usage",
		"## Usage",
		"<a id=\"secrets\"></a>**Secrets.**",
		"```",
		"# not a heading",
		"[not a link](missing.md)",
		"```",
		"See [x](b.md#nowhere) and `[code](missing.md)`.",
	}, "\n"))
	docs := map[string]*mdDoc{"a.md": doc, "docs/b.md": parseMarkdownText("docs/b.md", "# B\n")}
	for _, c := range []struct {
		from, target string
		ok           bool
	}{
		{"a.md", "#global-option-modelgate", true},
		{"a.md", "#limits-budgets-and-usage", true},
		{"a.md", "#usage", true},
		{"a.md", "#usage-1", true},
		{"a.md", "#usage-2", false},
		{"a.md", "#secrets", true},
		{"a.md", "#not-a-heading", false},
		{"a.md", "docs/b.md", true},
		{"a.md", "docs/b.md#b", true},
		{"a.md", "docs/b.md#c", false},
		{"a.md", "docs/c.md", false},
		{"docs/b.md", "../a.md#usage", true},
		{"docs/b.md", "../a.md#Usage", false},
		{"a.md", "https://example.com/x.md", true},
		{"a.md", "docs/security.md", true},
	} {
		msg := checkLink(c.from, c.target, docs)
		if (msg == "") != c.ok {
			t.Errorf("checkLink(%q, %q) = %q, want ok %v", c.from, c.target, msg, c.ok)
		}
	}
	if len(doc.links) != 1 || doc.links[0].target != "b.md#nowhere" {
		t.Errorf("links = %+v, want only b.md#nowhere (code is not linked)", doc.links)
	}
}

// markdownFiles lists the repository's own Markdown pages: the top level
// and docs/, as slash-separated paths from the root.
func markdownFiles() ([]string, error) {
	var files []string
	top, err := filepath.Glob("*.md")
	if err != nil {
		return nil, err
	}
	files = append(files, top...)
	err = filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	return files, err
}

type mdLink struct {
	target string
	line   int
}

type mdDoc struct {
	anchors map[string]bool
	links   []mdLink
}

var (
	// inlineLink matches [text](target) and ![alt](target), an optional
	// title after the target.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition, [name]: target.
	refDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$`)
	// htmlAnchor matches an explicit anchor, <a id="x"> or <a name="x">.
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	headingRe  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkText   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

func parseMarkdown(file string) (*mdDoc, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseMarkdownText(file, string(data)), nil
}

// parseMarkdownText collects a page's heading anchors, as GitHub makes
// them, and its links, outside fenced code blocks and code spans.
func parseMarkdownText(file, text string) *mdDoc {
	d := &mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	var fence string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			slug := githubSlug(m[2])
			if k := seen[slug]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				d.anchors[slug] = true
			}
			seen[slug]++
		}
		prose := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(prose, -1) {
			d.links = append(d.links, mdLink{target: m[1], line: n})
		}
		if m := refDef.FindStringSubmatch(prose); m != nil {
			d.links = append(d.links, mdLink{target: m[1], line: n})
		}
	}
	return d
}

// githubSlug is the anchor GitHub gives a heading: its text as rendered,
// lower-cased, without punctuation but hyphens and underscores, spaces
// turned into hyphens.
func githubSlug(heading string) string {
	text := linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLink says what is wrong with a link from page from, or "" when it
// resolves (or is not relative: other sites are not checked).
func checkLink(from, target string, docs map[string]*mdDoc) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "//") {
		return ""
	}
	file, frag, _ := strings.Cut(target, "#")
	dest := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			return "an absolute path: link relative to the page"
		}
		dest = path.Clean(path.Join(path.Dir(from), file))
	}
	d, ok := docs[dest]
	if !ok {
		st, err := os.Stat(filepath.FromSlash(dest))
		switch {
		case err == nil && frag != "" && !st.IsDir():
			return "an anchor into a file that is not one of the checked Markdown pages"
		case err == nil:
			return ""
		case pendingPages[dest]:
			return ""
		default:
			return fmt.Sprintf("%s does not exist", dest)
		}
	}
	if frag != "" && !d.anchors[frag] {
		return fmt.Sprintf("%s has no heading or anchor %q", dest, frag)
	}
	return ""
}
