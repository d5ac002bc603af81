package keyadmin

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/modelgate/modelgate/pricing"
	"github.com/modelgate/modelgate/usage"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

func TestUsageURI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "/modelgate/usage?group_by=key%2Cmodel"},
		{[]string{"--group-by", ""}, "/modelgate/usage"},
		{[]string{"--from", "2026-07-01", "--to", "2026-07-31", "--group-by", "day", "--key", "static:k-free", "--owner", "team a", "--address", "localhost:2999"},
			"/modelgate/usage?from=2026-07-01&group_by=day&key_id=static%3Ak-free&owner=team+a&to=2026-07-31"},
	} {
		c := usageCommand()
		if err := c.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := usageURI(caddycmd.Flags{FlagSet: c.Flags()}); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestWriteUsageTable renders reports as `caddy modelgate usage` prints
// them, after the JSON round trip the command makes, against
// testdata/usage-table.golden (-update rewrites it).
func TestWriteUsageTable(t *testing.T) {
	d := func(s string) usage.Day { return day(t, s) }
	rows := []usage.Row{
		{KeyID: "key_06h0f3dmbnbda28kaqnrfi69", KeyName: "ci", Owner: "team-a", Model: "gpt-4o", Provider: "oa", ProviderType: "openai", Day: d("2026-07-23"),
			Counts: usage.Counts{Requests: 1200, InputTokens: 1_534_000, CachedTokens: 400_000, OutputTokens: 210_500, Cost: 5_440_000_000}},
		{KeyID: "key_06h0f3dmbnbda28kaqnrfi69", KeyName: "ci", Owner: "team-a", Model: "claude/my-finetune", Provider: "claude", ProviderType: "anthropic", Day: d("2026-07-24"),
			Counts: usage.Counts{Requests: 3, InputTokens: 45, CacheWriteTokens: 12, OutputTokens: 30, ReasoningTokens: 9, Unpriced: 3}},
		{KeyID: "static:k-free", KeyName: "k-free", Owner: "k-free", Model: "rerank-v3.5", Provider: "co", ProviderType: "cohere", Day: d("2026-07-24"),
			Counts: usage.Counts{Requests: 2, Searches: 2, Cost: 4 * pricing.Cent}},
		{KeyID: "static:k-free", KeyName: "k-free", Owner: "", Model: "text-embedding-3-small", Provider: "oa", ProviderType: "openai", Day: d("2026-07-24"),
			Counts: usage.Counts{Requests: 7, EmbeddingTokens: 7000, Cost: 140 * pricing.Nanodollar}},
	}
	sum := func(rs []usage.Row) usage.Counts {
		var c usage.Counts
		for _, r := range rs {
			c.Add(r.Counts)
		}
		return c
	}
	var out bytes.Buffer
	for _, tc := range []struct {
		name   string
		by     []usage.Dimension
		rows   []usage.Row
		broken []string
	}{
		{"by key and model", []usage.Dimension{usage.ByKey, usage.ByModel}, rows[:1], nil},
		{"by everything, with unpriced requests and a record that could not be read", []usage.Dimension{usage.ByModel, usage.ByDay, usage.ByKey, usage.ByOwner, usage.ByProvider}, rows,
			[]string{"modelgate/usage/2026-07-24/0b6d7a4e.json.corrupt-1785000000"}},
		{"in total", nil, []usage.Row{{Counts: sum(rows)}}, nil},
		{"nothing", []usage.Dimension{usage.ByKey}, nil, nil},
	} {
		rep := usage.Report{Rows: tc.rows, Total: sum(tc.rows), Unreadable: tc.broken}
		b, err := json.Marshal(reportOf(usageParams{from: d("2026-07-01"), to: d("2026-07-24"), by: tc.by}, rep))
		if err != nil {
			t.Fatal(err)
		}
		var back usageReport
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		out.WriteString("=== " + tc.name + "\n")
		if err := writeUsageTable(&out, back); err != nil {
			t.Fatal(err)
		}
		out.WriteString("\n")
	}
	golden := filepath.Join("testdata", "usage-table.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the tables differ from %s (-update rewrites it):\n%s", golden, out.String())
	}
}
