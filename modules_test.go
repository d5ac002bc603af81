package modelgate_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// goMod is the part of `go mod edit -json`'s output these tests read.
type goMod struct {
	Module  struct{ Path string }
	Go      string
	Require []struct{ Path string }
	Replace []struct {
		Old struct{ Path string }
		New struct{ Path, Version string }
	}
}

// readGoMod reads a go.mod file through the go command.
func readGoMod(t *testing.T, file string) goMod {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", file).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", file, err)
	}
	var m goMod
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return m
}

// TestBenchModule keeps the load harness a module apart: bench/ builds
// against this checkout through its replace directive, and the product
// module requires nothing of it.
func TestBenchModule(t *testing.T) {
	root, bench := readGoMod(t, "go.mod"), readGoMod(t, "bench/go.mod")
	if root.Module.Path != "github.com/modelgate/modelgate" {
		t.Fatalf("go.mod: module %q: run the test from the repository root", root.Module.Path)
	}
	if want := root.Module.Path + "/bench"; bench.Module.Path != want {
		t.Errorf("bench/go.mod: module %q, want %q", bench.Module.Path, want)
	}
	for _, r := range root.Require {
		if strings.HasPrefix(r.Path, bench.Module.Path) {
			t.Errorf("go.mod requires %s: the product must not depend on the load harness", r.Path)
		}
	}
	replaced := false
	for _, r := range bench.Replace {
		if r.Old.Path == root.Module.Path {
			replaced = (r.New.Path == "../" || r.New.Path == "..") && r.New.Version == ""
		}
	}
	if !replaced {
		t.Errorf("bench/go.mod must replace %s with ../ (the checkout it measures): %+v", root.Module.Path, bench.Replace)
	}
}

// TestGoDirective keeps bench/go.mod's go directive and the Go version
// section of docs/development.md in step with go.mod's.
func TestGoDirective(t *testing.T) {
	root, bench := readGoMod(t, "go.mod"), readGoMod(t, "bench/go.mod")
	if root.Go == "" {
		t.Fatal("go.mod has no go directive")
	}
	if bench.Go != root.Go {
		t.Errorf("bench/go.mod says go %s, go.mod go %s: keep them equal", bench.Go, root.Go)
	}
	doc, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "`go.mod` says `go " + root.Go + "`"; !strings.Contains(string(doc), want) {
		t.Errorf("docs/development.md lacks %q: say in its Go version section why go.mod's directive is %s", want, root.Go)
	}
}
