package keyadmin

import (
	"bytes"
	"encoding/json"
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
		Usage: "key create|list|delete ... | usage ... | account ...",
		Short: "Manages modelgate's API keys and reports usage through the admin API",
		Long: `
Manages the managed API keys of a running modelgate through Caddy's admin API,
as the key settings page does: the keys live in the modelgate app's storage,
never in a file you edit. Reports the requests, tokens and cost the gateway
recorded. The admin endpoint is found as 'caddy reload' finds it: --address,
else the admin address of --config, else the default.

  caddy modelgate key create --name ci [--owner team-a] [--models smart,oa/*] [--expires 720h]
  caddy modelgate key list [--json]
  caddy modelgate key delete <id>
  caddy modelgate usage [--from 2026-07-01] [--to 2026-07-31] [--group-by key,model] [--key <id>] [--owner <owner>] [--json]
  caddy modelgate account list|show|set|suspend|resume|delete|member|audit ...
`,
		CobraFunc: func(cmd *cobra.Command) {
			key := &cobra.Command{Use: "key", Short: "Creates, lists and deletes managed API keys"}
			create := &cobra.Command{
				Use:   "create --name <name> [--owner <owner>] [--models <m1,m2>] [--expires <RFC 3339 time or duration>]",
				Short: "Creates a key and prints its secret, once",
				Args:  cobra.NoArgs,
				RunE:  caddycmd.WrapCommandFuncForCobra(cmdKeyCreate),
			}
			create.Flags().String("name", "", "The key's name (required)")
			create.Flags().String("owner", "", "Who owns the files and batches the key creates (default: the name)")
			create.Flags().String("models", "", "Comma-separated models the key may use (default: all)")
			create.Flags().String("expires", "", "When the key stops working: an RFC 3339 time or a duration such as 720h")
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
			for _, c := range []*cobra.Command{create, list, del} {
				adminFlags(c)
				key.AddCommand(c)
			}
			cmd.AddCommand(key, usageCommand(), accountCommand())
		},
	})
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
		return nil, fmt.Errorf("finding the admin API: %v", err)
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
	defer res.Body.Close()
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
	fmt.Printf("Created key %s (%s), owner %s.\n\n    %s\n\nThis is the only time the key is shown: store it now.\n", k.Name, k.ID, k.Owner, k.Secret)
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
