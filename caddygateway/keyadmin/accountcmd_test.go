package keyadmin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/keys"
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

// TestAccountSetFlags: account set changes an account's own ceilings as
// key update changes a key's: what the flags do not name stays.
func TestAccountSetFlags(t *testing.T) {
	own := keys.Policy{Budget: &keys.Budget{USD: "50", Period: "month"}}
	for _, tc := range []struct {
		args []string
		want string // the limits and budget as JSON; "" for none changed
		err  string
	}{
		{[]string{"--rpm", "100"}, `{"limits":{"requests_per_minute":100},"budget":{"usd":"50","period":"month"}}`, ""},
		{[]string{"--tpm", "5000", "--concurrent", "3", "--budget", "25", "--period", "day"}, `{"limits":{"tokens_per_minute":5000,"concurrent_requests":3},"budget":{"usd":"25","period":"day"}}`, ""},
		{[]string{"--budget", "$0.50"}, `{"budget":{"usd":"0.50","period":"month"}}`, ""},
		{[]string{"--default-budget"}, `{}`, ""},
		{[]string{"--email", "a@b.example"}, "", ""},
		{[]string{"--budget", "25", "--period", "week"}, "", "--period"},
		{[]string{"--budget", "lots"}, "", "--budget"},
	} {
		c := setCommand(t)
		if err := c.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		p, changed, err := applyPolicyFlags(caddycmd.Flags{FlagSet: c.Flags()}, own)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error naming %s", tc.args, err, tc.err)
			}
			continue
		}
		b, _ := json.Marshal(p)
		if err != nil || changed != (tc.want != "") || changed && string(b) != tc.want {
			t.Errorf("%q: %s changed=%v %v, want %s", tc.args, b, changed, err, tc.want)
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
