package keyadmin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/keys"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "modelgate",
		Usage: "key create|update|list|delete ... | usage ... | account ...",
		Short: "Manages modelgate's API keys and reports usage through the admin API",
		Long: `
Manages the managed API keys of a running modelgate through Caddy's admin API,
as the key settings page does: the keys live in the modelgate app's storage,
never in a file you edit. Reports the requests, tokens and cost the gateway
recorded. The admin endpoint is found as 'caddy reload' finds it: --address,
else the admin address of --config, else the default.

  caddy modelgate key create --name ci [--owner team-a] [--models smart,oa/*] [--expires 720h]
                             [--rpm 60] [--tpm 200000] [--concurrent 8] [--budget 25 [--period month]]
  caddy modelgate key update <id> [--rpm …] [--tpm …] [--concurrent …] [--budget … [--period …]]
                                  [--default-limits] [--default-budget]
  caddy modelgate key list [--json]
  caddy modelgate key delete <id>
  caddy modelgate usage [--from 2026-07-01] [--to 2026-07-31] [--group-by key,model] [--key <id>] [--owner <owner>] [--json]
  caddy modelgate account list|show|set|suspend|resume|delete|member|audit ...
`,
		CobraFunc: func(cmd *cobra.Command) {
			key := &cobra.Command{Use: "key", Short: "Creates, updates, lists and deletes managed API keys"}
			create := &cobra.Command{
				Use:   "create --name <name> [--owner <owner>] [--models <m1,m2>] [--expires <RFC 3339 time or duration>] [limits and budget]",
				Short: "Creates a key and prints its secret, once",
				Args:  cobra.NoArgs,
				RunE:  caddycmd.WrapCommandFuncForCobra(cmdKeyCreate),
			}
			create.Flags().String("name", "", "The key's name (required)")
			create.Flags().String("owner", "", "Who owns the files and batches the key creates (default: the name)")
			create.Flags().String("models", "", "Comma-separated models the key may use (default: all)")
			create.Flags().String("expires", "", "When the key stops working: an RFC 3339 time or a duration such as 720h")
			policyFlags(create)
			upd := &cobra.Command{
				Use:   "update <id> [--rpm <n>] [--tpm <n>] [--concurrent <n>] [--budget <usd> [--period day|month|total]] [--default-limits] [--default-budget]",
				Short: "Sets a key's own limits and budget, or returns it to the defaults",
				Args:  cobra.ExactArgs(1),
				RunE: func(c *cobra.Command, args []string) error {
					return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
						return cmdKeyUpdate(fl, args[0])
					})(c, args)
				},
			}
			policyFlags(upd)
			upd.Flags().Bool("default-limits", false, "Drop the key's own limits: it follows the gateway's default for keys")
			upd.Flags().Bool("default-budget", false, "Drop the key's own budget: it follows the gateway's default for keys")
			list := &cobra.Command{
				Use:   "list [--json]",
				Short: "Lists the keys (never their secrets)",
				Args:  cobra.NoArgs,
				RunE:  caddycmd.WrapCommandFuncForCobra(cmdKeyList),
			}
			list.Flags().Bool("json", false, "Print the admin API's JSON")
			del := &cobra.Command{
				Use:   "delete <id>",
				Short: "Deletes a key: it stops working",
				Args:  cobra.ExactArgs(1),
				RunE: func(c *cobra.Command, args []string) error {
					return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
						return cmdKeyDelete(fl, args[0])
					})(c, args)
				},
			}
			for _, c := range []*cobra.Command{create, upd, list, del} {
				adminFlags(c)
				key.AddCommand(c)
			}
			cmd.AddCommand(key, usageCommand(), accountCommand())
		},
	})
}

// policyFlags adds the flags of a key's own limits and budget to c.
func policyFlags(c *cobra.Command) {
	c.Flags().Int64("rpm", 0, "The key's own limit of requests per minute (0: none)")
	c.Flags().Int64("tpm", 0, "The key's own limit of tokens per minute, input and output (0: none)")
	c.Flags().Int64("concurrent", 0, "The key's own limit of requests in flight at once (0: none)")
	c.Flags().String("budget", "", "The key's own budget in US dollars (25, 0.50) per --period")
	c.Flags().String("period", "month", "The budget's period: day or month (UTC calendar), or total")
}

// limitFlags are the flags of a key's own limits and the field of each.
var limitFlags = []struct {
	name  string
	field func(*keys.Limits) *int64
}{
	{"rpm", func(l *keys.Limits) *int64 { return &l.RequestsPerMinute }},
	{"tpm", func(l *keys.Limits) *int64 { return &l.TokensPerMinute }},
	{"concurrent", func(l *keys.Limits) *int64 { return &l.ConcurrentRequests }},
}

// applyPolicyFlags returns p with the limits and budget the flags set:
// limit flags make the key's limits its own (starting from p's own, or
// none), --budget and --period its budget; --default-limits and
// --default-budget (update only) drop them, so the key follows the
// defaults. changed tells whether any flag was given.
func applyPolicyFlags(fl caddycmd.Flags, p keys.Policy) (_ keys.Policy, changed bool, err error) {
	given := func(name string) bool { return fl.Lookup(name) != nil && fl.Changed(name) }
	limits := false
	for _, f := range limitFlags {
		limits = limits || given(f.name)
	}
	if limits {
		if given("default-limits") {
			return p, false, fmt.Errorf("--default-limits drops the key's own limits: give it without --rpm, --tpm and --concurrent")
		}
		l := keys.Limits{}
		if p.Limits != nil {
			l = *p.Limits
		}
		for _, f := range limitFlags {
			if given(f.name) {
				*f.field(&l) = int64(fl.Int(f.name))
			}
		}
		p.Limits, changed = &l, true
	} else if given("default-limits") && fl.Bool("default-limits") {
		p.Limits, changed = nil, true
	}

	switch {
	case given("budget") && given("default-budget"):
		return p, false, fmt.Errorf("--default-budget drops the key's own budget: give it without --budget and --period")
	case given("budget"):
		p.Budget, changed = &keys.Budget{USD: strings.TrimPrefix(strings.TrimSpace(fl.String("budget")), "$"), Period: fl.String("period")}, true
	case given("period"):
		if p.Budget == nil {
			return p, false, fmt.Errorf("--period sets the period of the key's own budget: give --budget too")
		}
		b := *p.Budget
		b.Period = fl.String("period")
		p.Budget, changed = &b, true
	case given("default-budget") && fl.Bool("default-budget"):
		p.Budget, changed = nil, true
	}
	if err := keys.ValidatePolicy(p); err != nil {
		var inv *keys.InvalidError
		if errors.As(err, &inv) {
			return p, false, fmt.Errorf("%s", strings.NewReplacer("limits.requests_per_minute", "--rpm", "limits.tokens_per_minute", "--tpm",
				"limits.concurrent_requests", "--concurrent", "budget.usd", "--budget", "budget.period", "--period").Replace(inv.Message))
		}
		return p, false, err
	}
	return p, changed, nil
}

// policyText tells a key's limits and budget: its own, or the defaults.
func policyText(p keys.Policy) string {
	limits := "the defaults for keys"
	if l := p.Limits; l != nil {
		n := func(v int64) string {
			if v <= 0 {
				return "none"
			}
			return fmt.Sprint(v)
		}
		limits = fmt.Sprintf("its own: rpm %s, tpm %s, concurrent %s", n(l.RequestsPerMinute), n(l.TokensPerMinute), n(l.ConcurrentRequests))
	}
	budget := "the default for keys"
	if b := p.Budget; b != nil {
		per := map[string]string{"day": "per day (UTC)", "month": "per month (UTC)", "total": "in total"}[b.Period]
		budget = fmt.Sprintf("its own: $%s %s", b.USD, per)
	}
	return fmt.Sprintf("Limits: %s. Budget: %s.", limits, budget)
}

// adminFlags adds the flags that find the admin endpoint to c.
func adminFlags(c *cobra.Command) {
	c.Flags().StringP("config", "c", "", "Configuration file to find the admin address in, if --address is not used")
	c.Flags().StringP("adapter", "a", "", "Name of the config adapter (when --config is used)")
	c.Flags().String("address", "", "The admin API's address, if not the default")
}

// adminRequest sends one request to the admin API the flags name.
func adminRequest(fl caddycmd.Flags, method, uri string, body any) ([]byte, error) {
	var cfg []byte
	if f := fl.String("config"); f != "" {
		var err error
		if cfg, _, _, err = caddycmd.LoadConfig(f, fl.String("adapter")); err != nil {
			return nil, err
		}
	}
	addr, err := caddycmd.DetermineAdminAPIAddress(fl.String("address"), cfg, fl.String("config"), fl.String("adapter"))
	if err != nil {
		return nil, fmt.Errorf("finding the admin API: %w", err)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	res, err := caddycmd.AdminAPIRequest(addr, method, uri, nil, rd)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	return io.ReadAll(res.Body)
}

func cmdKeyCreate(fl caddycmd.Flags) (int, error) {
	nk := keys.NewKey{Name: fl.String("name"), Owner: fl.String("owner")}
	if nk.Name == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("--name is required")
	}
	for _, m := range strings.Split(fl.String("models"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			nk.Models = append(nk.Models, m)
		}
	}
	if s := fl.String("expires"); s != "" {
		t, err := parseExpiry(s, time.Now())
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		u := t.Unix()
		nk.ExpiresAt = &u
	}
	p, _, err := applyPolicyFlags(fl, keys.Policy{})
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	nk.Limits, nk.Budget = p.Limits, p.Budget
	b, err := adminRequest(fl, http.MethodPost, "/modelgate/keys", nk)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var k struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Owner  string `json:"owner"`
		Secret string `json:"key"`
	}
	if err := json.Unmarshal(b, &k); err != nil || k.Secret == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	fmt.Printf("Created key %s (%s), owner %s.\n%s\n\n    %s\n\nThis is the only time the key is shown: store it now.\n",
		k.Name, k.ID, k.Owner, policyText(p), k.Secret)
	return caddy.ExitCodeSuccess, nil
}

// cmdKeyUpdate sets the limits and budget of the key id that the flags
// give, keeping the rest of its own policy: it reads the key, then
// replaces its policy (PATCH replaces both limits and budget).
func cmdKeyUpdate(fl caddycmd.Flags, id string) (int, error) {
	b, err := adminRequest(fl, http.MethodGet, "/modelgate/keys/"+id, nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var k keys.Key
	if err := json.Unmarshal(b, &k); err != nil || k.ID == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	p, changed, err := applyPolicyFlags(fl, keys.Policy{Limits: k.Limits, Budget: k.Budget})
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if !changed {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("nothing to change: give --rpm, --tpm, --concurrent, --budget, --period, --default-limits or --default-budget")
	}
	if b, err = adminRequest(fl, http.MethodPatch, "/modelgate/keys/"+id, p); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	k = keys.Key{}
	if err := json.Unmarshal(b, &k); err != nil || k.ID == "" {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	fmt.Printf("Updated key %s (%s).\n%s\n", k.Name, k.ID, policyText(keys.Policy{Limits: k.Limits, Budget: k.Budget}))
	return caddy.ExitCodeSuccess, nil
}

// parseExpiry reads an RFC 3339 time or a duration from now.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := caddy.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--expires %q: give an RFC 3339 time (2027-01-31T00:00:00Z) or a duration (720h, 90d)", s)
	}
	return now.Add(d), nil
}

func cmdKeyList(fl caddycmd.Flags) (int, error) {
	b, err := adminRequest(fl, http.MethodGet, "/modelgate/keys", nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("json") {
		_, err := os.Stdout.Write(b)
		return caddy.ExitCodeSuccess, err
	}
	var list struct {
		Data []keys.Key `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	return caddy.ExitCodeSuccess, writeKeyTable(os.Stdout, list.Data)
}

// writeKeyTable prints keys as a table.
func writeKeyTable(w io.Writer, ks []keys.Key) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tOWNER\tKEY\tMODELS\tCREATED\tLAST USED\tEXPIRES\tEXPOSED")
	at := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return time.Unix(*p, 0).UTC().Format("2006-01-02 15:04")
	}
	for _, k := range ks {
		models := "all"
		if len(k.Models) > 0 {
			models = strings.Join(k.Models, ",")
		}
		created := k.CreatedAt
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Owner, k.Hint, models,
			at(&created), at(k.LastUsedAt), at(k.ExpiresAt), at(k.ExposedAt))
	}
	return tw.Flush()
}

func cmdKeyDelete(fl caddycmd.Flags, id string) (int, error) {
	if _, err := adminRequest(fl, http.MethodDelete, "/modelgate/keys/"+id, nil); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	fmt.Printf("Deleted key %s: it no longer works.\n", id)
	return caddy.ExitCodeSuccess, nil
}
