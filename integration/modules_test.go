package integration

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// TestModuleList keeps ../testdata/modules.txt, which the test script
// compares with the built binary's list-modules, equal to what this package
// registers.
func TestModuleList(t *testing.T) {
	data, err := os.ReadFile("../testdata/modules.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(data))
	var got []string
	for _, id := range caddy.Modules() {
		if id == "modelgate.providers.toy" || strings.Contains(id, "modelgate_test") {
			continue // toyprovider and an event recorder, registered by this package's tests only
		}
		if strings.HasPrefix(id, "modelgate") || strings.Contains(id, ".modelgate") {
			got = append(got, id)
		}
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("registered modules:\n%s\n\ntestdata/modules.txt:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
