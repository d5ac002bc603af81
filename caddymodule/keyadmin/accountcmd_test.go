package keyadmin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
)

// setCommand is `caddy modelgate account set`.
func setCommand(t *testing.T) *cobra.Command {
	for _, c := range accountCommand().Commands() {
		if c.Name() == "set" {
			return c
		}
	}
	t.Fatal("no set command")
	return nil
}

func TestAccountSetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the body's limits and budget as JSON; "" for none set
		err  string
	}{
		{[]string{"--rpm", "100", "--budget", "25/month"}, `{"limits":{"requests_per_minute":100},"budget":{"usd":"25","period":"month"}}`, ""},
		{[]string{"--tpm", "5000", "--concurrent", "3"}, `{"limits":{"tokens_per_minute":5000,"concurrent_requests":3}}`, ""},
		{[]string{"--budget", "$0.50/day"}, `{"budget":{"usd":"0.50","period":"day"}}`, ""},
		{[]string{"--default"}, `{}`, ""},
		{[]string{"--budget", "none"}, `{}`, ""},
		{[]string{"--email", "a@b.example"}, "", ""},
		{[]string{"--budget", "25"}, "", "--budget"},
		{[]string{"--budget", "25/week"}, "", "budget.period"},
	} {
		c := setCommand(t)
		if err := c.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		p, set, err := policyFlags(caddycmd.Flags{FlagSet: c.Flags()})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error naming %s", tc.args, err, tc.err)
			}
			continue
		}
		b, _ := json.Marshal(p)
		if err != nil || set != (tc.want != "") || set && string(b) != tc.want {
			t.Errorf("%q: %s set=%v %v, want %s", tc.args, b, set, err, tc.want)
		}
	}
}

func TestWriteAccountTables(t *testing.T) {
	at := int64(1798761600)
	var buf bytes.Buffer
	list := []accountSummary{
		{Summary: accounts.Summary{ID: "alice", Keys: 2, Members: 1}, SpentUSD: "1.25"},
		{Summary: accounts.Summary{ID: "team-a", Keys: 0, SuspendedAt: &at}, SpentUSD: "0"},
	}
	if err := writeAccountTable(&buf, list); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"ACCOUNT", "alice    2     1        1.25", "suspended 2027-01-01"} {
		if !strings.Contains(out, want) {
			t.Errorf("the account table lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	entries := []accounts.Entry{{Time: "2027-01-01T00:00:00.000Z", Actor: accounts.Operator("admin API", "127.0.0.1"),
		Action: "account.suspended", Target: accounts.Target{Type: "account", ID: "team-a"}}}
	if err := writeAuditTable(&buf, entries); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "operator admin API  127.0.0.1  account.suspended  account team-a") {
		t.Errorf("the audit table:\n%s", out)
	}
}
