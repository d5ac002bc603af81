package keyadmin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/keys"
)

// accountCommand is `caddy modelgate account`: the operator's accounts,
// through the admin API (accountapi.go).
func accountCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "account list|show|set|suspend|resume|delete|member|audit ...",
		Short: "Lists, limits, suspends and deletes accounts; manages their members; reads their audit log",
		Long: `
Works on the accounts of a running modelgate through Caddy's admin API, as the
operator. An account is the owner of managed keys: the account holders who sign
in to the key settings page manage their own account's keys there.

  caddy modelgate account list [--json]
  caddy modelgate account show <account>
  caddy modelgate account set <account> [--rpm n] [--tpm n] [--concurrent n] [--budget 25 --period month] [--default-limits] [--default-budget] [--email a@b.example]
  caddy modelgate account suspend <account> [--reason text]
  caddy modelgate account resume <account>
  caddy modelgate account delete <account>
  caddy modelgate account member add <account> <identity> owner|admin|member|viewer
  caddy modelgate account member remove <account> <identity>
  caddy modelgate account audit <account> [--limit 50] [--json]
`,
	}
	list := &cobra.Command{Use: "list [--json]", Short: "Lists every account with its keys and spend this month", Args: cobra.NoArgs,
		RunE: caddycmd.WrapCommandFuncForCobra(cmdAccountList)}
	list.Flags().Bool("json", false, "Print the admin API's JSON")
	show := withArgs(&cobra.Command{Use: "show <account>", Short: "Prints an account: its ceilings, members, state"}, 1, cmdAccountShow)
	set := withArgs(&cobra.Command{Use: "set <account> [flags]", Short: "Sets an account's ceilings (limits and budget of all its keys) or e-mail"}, 1, cmdAccountSet)
	set.Flags().Int64("rpm", 0, "Requests per minute of all the account's keys together (0: none)")
	set.Flags().Int64("tpm", 0, "Tokens per minute of all the account's keys together (0: none)")
	set.Flags().Int64("concurrent", 0, "Requests in flight at once of all the account's keys together (0: none)")
	set.Flags().String("budget", "", "Budget of all the account's keys in US dollars (25, 0.50) per --period")
	set.Flags().String("period", "month", "The budget's period: day or month (UTC calendar), or total")
	set.Flags().Bool("default-limits", false, "Drop the account's own limits: back to the configured owner limits")
	set.Flags().Bool("default-budget", false, "Drop the account's own budget: back to the configured owner budget")
	set.Flags().String("email", "", "Where leak mail about the account's keys goes")
	set.Flags().Bool("clear-email", false, "Remove the account's e-mail")
	suspend := withArgs(&cobra.Command{Use: "suspend <account> [--reason text]", Short: "Refuses every key of the account on every instance, until resume"}, 1,
		func(fl caddycmd.Flags, args []string) (int, error) {
			return accountAction(fl, http.MethodPost, args[0], "/suspend", map[string]string{"reason": fl.String("reason")}, "Suspended account %s: its keys are refused.\n")
		})
	suspend.Flags().String("reason", "", "Why, shown to the account holders")
	resume := withArgs(&cobra.Command{Use: "resume <account>", Short: "Lets a suspended account's keys work again"}, 1,
		func(fl caddycmd.Flags, args []string) (int, error) {
			return accountAction(fl, http.MethodPost, args[0], "/resume", nil, "Resumed account %s: its keys work again.\n")
		})
	del := withArgs(&cobra.Command{Use: "delete <account>", Short: "Deletes an account: its keys revoked, their batches cancelled"}, 1, cmdAccountDelete)
	member := &cobra.Command{Use: "member add|remove ...", Short: "Adds, changes or removes an account's members"}
	add := withArgs(&cobra.Command{Use: "add <account> <identity> <role>", Short: "Gives an identity a role in the account"}, 3,
		func(fl caddycmd.Flags, args []string) (int, error) {
			if _, err := accounts.ParseRole(args[2]); err != nil {
				return caddy.ExitCodeFailedStartup, err
			}
			return accountAction(fl, http.MethodPost, args[0], "/members", map[string]string{"identity": args[1], "role": args[2]},
				"Account %s: "+args[1]+" is "+args[2]+".\n")
		})
	remove := withArgs(&cobra.Command{Use: "remove <account> <identity>", Short: "Removes a member from the account"}, 2,
		func(fl caddycmd.Flags, args []string) (int, error) {
			return accountAction(fl, http.MethodDelete, args[0], "/members/"+url.PathEscape(args[1]), nil, "Account %s: "+args[1]+" is no longer a member.\n")
		})
	audit := withArgs(&cobra.Command{Use: "audit <account> [--limit n] [--json]", Short: "Prints the account's audit log, newest first"}, 1, cmdAccountAudit)
	audit.Flags().Int("limit", 50, "How many entries")
	audit.Flags().Bool("json", false, "Print the admin API's JSON")
	for _, cmd := range []*cobra.Command{list, show, set, suspend, resume, del, add, remove, audit} {
		adminFlags(cmd)
	}
	member.AddCommand(add, remove)
	c.AddCommand(list, show, set, suspend, resume, del, member, audit)
	return c
}

// withArgs makes c run f with exactly n arguments.
func withArgs(c *cobra.Command, n int, f func(caddycmd.Flags, []string) (int, error)) *cobra.Command {
	c.Args = cobra.ExactArgs(n)
	c.RunE = func(cc *cobra.Command, args []string) error {
		return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) { return f(fl, args) })(cc, args)
	}
	return c
}

// accountURI is the admin API path of an account, and sub after it.
func accountURI(id, sub string) string { return "/modelgate/accounts/" + url.PathEscape(id) + sub }

// adminCall sends a request and turns an error answer into an error.
func adminCall(fl caddycmd.Flags, method, uri string, body any) ([]byte, error) {
	b, err := adminRequest(fl, method, uri, body)
	if err != nil {
		return nil, err
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return nil, fmt.Errorf("%s", e.Error)
	}
	return b, nil
}

func accountAction(fl caddycmd.Flags, method, id, sub string, body any, done string) (int, error) {
	if _, err := adminCall(fl, method, accountURI(id, sub), body); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	fmt.Printf(done, id)
	return caddy.ExitCodeSuccess, nil
}

func cmdAccountList(fl caddycmd.Flags) (int, error) {
	b, err := adminCall(fl, http.MethodGet, "/modelgate/accounts", nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("json") {
		_, err := os.Stdout.Write(b)
		return caddy.ExitCodeSuccess, err
	}
	var list struct {
		Data []accountSummary `json:"data"`
		From string           `json:"from"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	return caddy.ExitCodeSuccess, writeAccountTable(os.Stdout, list.Data)
}

// writeAccountTable prints accounts as a table.
func writeAccountTable(w io.Writer, list []accountSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tKEYS\tMEMBERS\tSPENT THIS MONTH (USD)\tCEILINGS\tSTATE")
	for _, a := range list {
		state := "active"
		switch {
		case a.DeletedAt != nil:
			state = "deleted " + dayOf(*a.DeletedAt)
		case a.SuspendedAt != nil:
			state = "suspended " + dayOf(*a.SuspendedAt)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", a.ID, a.Keys, a.Members, a.SpentUSD, ceilingText(a.Ceilings), state)
	}
	return tw.Flush()
}

func dayOf(unix int64) string { return time.Unix(unix, 0).UTC().Format("2006-01-02") }

// ceilingText writes limits and a budget in the Caddyfile's words.
func ceilingText(p keys.Policy) string {
	var parts []string
	if l := p.Limits; l != nil {
		for _, f := range []struct {
			name string
			v    int64
		}{{"rpm", l.RequestsPerMinute}, {"tpm", l.TokensPerMinute}, {"concurrent", l.ConcurrentRequests}} {
			if f.v > 0 {
				parts = append(parts, f.name+" "+strconv.FormatInt(f.v, 10))
			}
		}
	}
	if b := p.Budget; b != nil {
		parts = append(parts, "budget "+b.USD+" "+b.Period)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func cmdAccountShow(fl caddycmd.Flags, args []string) (int, error) {
	b, err := adminCall(fl, http.MethodGet, accountURI(args[0], ""), nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var v accounts.View
	if err := json.Unmarshal(b, &v); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	return caddy.ExitCodeSuccess, writeAccount(os.Stdout, v)
}

// writeAccount prints one account.
func writeAccount(w io.Writer, v accounts.View) error {
	fmt.Fprintf(w, "Account %s\n", v.ID)
	switch {
	case v.DeletedAt != nil:
		fmt.Fprintf(w, "  State:     deleted %s\n", dayOf(*v.DeletedAt))
	case v.SuspendedAt != nil:
		fmt.Fprintf(w, "  State:     suspended %s %s\n", dayOf(*v.SuspendedAt), v.SuspendedReason)
	default:
		fmt.Fprintln(w, "  State:     active")
	}
	email := v.Email
	if email == "" {
		email = "-"
	}
	fmt.Fprintf(w, "  E-mail:    %s\n  Ceilings:  %s\n  Own:       %s\n\n", email, ceilingText(v.Ceilings), ceilingText(v.Policy()))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tROLE\tSET IN")
	for _, m := range v.Everyone {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Identity, m.Role, m.Source)
	}
	return tw.Flush()
}

func cmdAccountSet(fl caddycmd.Flags, args []string) (int, error) {
	body := map[string]any{}
	if fl.Bool("clear-email") {
		body["email"] = ""
	} else if e := fl.String("email"); e != "" {
		body["email"] = e
	}
	// The flags change the account's own policy as they change a key's
	// (key update): what they do not name stays.
	b, err := adminCall(fl, http.MethodGet, accountURI(args[0], ""), nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var v accounts.View
	if err := json.Unmarshal(b, &v); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	p, changed, err := applyPolicyFlags(fl, v.Policy())
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if changed {
		body["limits"], body["budget"] = p.Limits, p.Budget
	}
	if len(body) == 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("nothing to set: give --rpm, --tpm, --concurrent, --budget, --default-limits, --default-budget or --email")
	}
	if b, err = adminCall(fl, http.MethodPatch, accountURI(args[0], ""), body); err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var a accounts.Account
	if err := json.Unmarshal(b, &a); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	fmt.Printf("Account %s: own ceilings %s.\n", a.ID, ceilingText(a.Policy()))
	return caddy.ExitCodeSuccess, nil
}

func cmdAccountDelete(fl caddycmd.Flags, args []string) (int, error) {
	b, err := adminCall(fl, http.MethodDelete, accountURI(args[0], ""), nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	var res struct {
		Keys []string `json:"keys_deleted"`
	}
	_ = json.Unmarshal(b, &res)
	fmt.Printf("Deleted account %s: %d %s revoked, their batches cancelled.\n", args[0], len(res.Keys), plural(int64(len(res.Keys)), "key", "keys"))
	return caddy.ExitCodeSuccess, nil
}

func cmdAccountAudit(fl caddycmd.Flags, args []string) (int, error) {
	b, err := adminCall(fl, http.MethodGet, accountURI(args[0], "/audit")+"?limit="+strconv.Itoa(fl.Int("limit")), nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("json") {
		_, err := os.Stdout.Write(b)
		return caddy.ExitCodeSuccess, err
	}
	var page accounts.Page
	if err := json.Unmarshal(b, &page); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API")
	}
	return caddy.ExitCodeSuccess, writeAuditTable(os.Stdout, page.Data)
}

// writeAuditTable prints audit entries as a table.
func writeAuditTable(w io.Writer, entries []accounts.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tBY\tFROM\tACTION\tTARGET")
	for _, e := range entries {
		from := e.Actor.From
		if from == "" {
			from = "-"
		}
		target := e.Target.Type + " " + e.Target.ID
		if e.Target.Name != "" {
			target += " (" + e.Target.Name + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Time, e.Actor.Describe(), from, e.Action, target)
	}
	return tw.Flush()
}
