package keyadmin

import (
	"reflect"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/keys"
)

// TestApplyPolicyFlags checks how the flags of `caddy modelgate key create`
// and `update` become a key's limits and budget: given limits make them the
// key's own, kept where the key had its own; a budget with its period; the
// default flags drop them; mistakes are refused naming the flag.
func TestApplyPolicyFlags(t *testing.T) {
	own := keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 30, ConcurrentRequests: 4}, Budget: &keys.Budget{USD: "25", Period: "month"}}
	for _, tc := range []struct {
		name    string
		from    keys.Policy
		args    []string
		want    keys.Policy
		changed bool
		err     string
	}{
		{"nothing", keys.Policy{}, nil, keys.Policy{}, false, ""},
		{"limits of its own", keys.Policy{}, []string{"--rpm", "60", "--tpm", "200000"},
			keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 60, TokensPerMinute: 200000}}, true, ""},
		{"a budget, by month by default", keys.Policy{}, []string{"--budget", "$10.50"},
			keys.Policy{Budget: &keys.Budget{USD: "10.50", Period: "month"}}, true, ""},
		{"a daily budget", keys.Policy{}, []string{"--budget", "2", "--period", "day"},
			keys.Policy{Budget: &keys.Budget{USD: "2", Period: "day"}}, true, ""},
		{"one limit changed, the others kept", own, []string{"--rpm", "90"},
			keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 90, ConcurrentRequests: 4}, Budget: own.Budget}, true, ""},
		{"a limit removed", own, []string{"--concurrent", "0"},
			keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 30}, Budget: own.Budget}, true, ""},
		{"the period alone", own, []string{"--period", "total"},
			keys.Policy{Limits: own.Limits, Budget: &keys.Budget{USD: "25", Period: "total"}}, true, ""},
		{"back to the defaults", own, []string{"--default-limits", "--default-budget"}, keys.Policy{}, true, ""},
		{"a negative limit", keys.Policy{}, []string{"--tpm", "-1"}, keys.Policy{}, false, "--tpm must not be negative"},
		{"a budget that is no amount", keys.Policy{}, []string{"--budget", "lots"}, keys.Policy{}, false, "--budget \"lots\" is not an amount"},
		{"a zero budget", keys.Policy{}, []string{"--budget", "0"}, keys.Policy{}, false, "--budget must be more than 0"},
		{"an unknown period", keys.Policy{}, []string{"--budget", "5", "--period", "week"}, keys.Policy{}, false, "--period must be day, month or total"},
		{"a period without a budget", keys.Policy{}, []string{"--period", "day"}, keys.Policy{}, false, "give --budget too"},
		{"default and own limits", own, []string{"--default-limits", "--rpm", "5"}, keys.Policy{}, false, "--default-limits drops"},
		{"default and own budget", own, []string{"--default-budget", "--budget", "5"}, keys.Policy{}, false, "--default-budget drops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cobra.Command{}
			policyFlags(c)
			c.Flags().Bool("default-limits", false, "")
			c.Flags().Bool("default-budget", false, "")
			if err := c.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			got, changed, err := applyPolicyFlags(caddycmd.Flags{FlagSet: c.Flags()}, tc.from)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || changed != tc.changed || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v %+v changed %v, %v; want %+v %+v changed %v", got.Limits, got.Budget, changed, err, tc.want.Limits, tc.want.Budget, tc.changed)
			}
		})
	}
	// create has no --default-* flags.
	c := &cobra.Command{}
	policyFlags(c)
	if _, changed, err := applyPolicyFlags(caddycmd.Flags{FlagSet: c.Flags()}, keys.Policy{}); err != nil || changed {
		t.Errorf("create without policy flags: %v %v", changed, err)
	}
}

func TestPolicyText(t *testing.T) {
	for _, tc := range []struct {
		p    keys.Policy
		want string
	}{
		{keys.Policy{}, "Limits: the defaults for keys. Budget: the default for keys."},
		{keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 60}, Budget: &keys.Budget{USD: "0.50", Period: "day"}},
			"Limits: its own: rpm 60, tpm none, concurrent none. Budget: its own: $0.50 per day (UTC)."},
	} {
		if got := policyText(tc.p); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}
