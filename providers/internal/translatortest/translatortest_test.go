package translatortest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providerkit"
)

func TestCheckGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "golden.json")
	if err := os.WriteFile(path, []byte("{\n  \"a\": [1, 2],\n  \"b\": \"x\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		got   string
		fails bool
	}{
		{`{"b":"x","a":[1,2]}`, false},
		{`{"a":[1,2],"b":"y"}`, true},
		{`{"a":[2,1],"b":"x"}`, true},
		{`{"a":[1,2],"b":"x","c":null}`, true},
		{`{"a":[1,2]`, true},
		{`{"b":"x","a":[1,2]} {}`, true},
	} {
		if failed, _ := providerkit.Failures(t, func(tb testing.TB) { CheckGolden(tb, path, []byte(tt.got)) }); failed != tt.fails {
			t.Errorf("CheckGolden(%s): failed %v, want %v", tt.got, failed, tt.fails)
		}
	}
	if failed, _ := providerkit.Failures(t, func(tb testing.TB) { CheckGolden(tb, path+".missing", []byte(`{}`)) }); !failed {
		t.Error("a missing golden file passed")
	}
}

func TestTravelRequest(t *testing.T) {
	body := TravelRequest{Model: "my-model", CallIDs: [3]string{"a", "b", "c"}, Params: "  \"top_p\": 1,\n"}.Body()
	if _, err := providers.ValidateChat(body); err != nil {
		t.Fatalf("the benchmark request does not pass ValidateChat: %v\n%s", err, body)
	}
}
