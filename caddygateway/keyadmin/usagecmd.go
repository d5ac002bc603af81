package keyadmin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/modelgate/modelgate/usage"
)

// usageCommand is `caddy modelgate usage`: GET /modelgate/usage as a table.
func usageCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "usage [--from <day>] [--to <day>] [--group-by key,model] [--key <id>] [--owner <owner>] [--json]",
		Short: "Prints the requests, tokens and cost the gateway recorded",
		Long: `
Prints the usage the gateway recorded (every instance's, on the shared storage)
over a range of UTC days, grouped by any of key, owner, model, provider and day,
with a TOTAL line. Costs are in US dollars at the price table's rates; requests
of models without a price are counted in UNPRICED, and their cost is not in
COST (USD).
`,
		Args: cobra.NoArgs,
		RunE: caddycmd.WrapCommandFuncForCobra(cmdUsage),
	}
	c.Flags().String("from", "", "The first UTC day, such as 2026-07-01 (default: the first of this month)")
	c.Flags().String("to", "", "The last UTC day, included (default: today)")
	c.Flags().String("group-by", "key,model", "Comma-separated: key, owner, model, provider, day; \"\" for the total only")
	c.Flags().String("key", "", "Only this key's usage: its id (static keys: static:<name>)")
	c.Flags().String("owner", "", "Only this owner's usage")
	c.Flags().Bool("json", false, "Print the admin API's JSON")
	adminFlags(c)
	return c
}

// usageURI is the admin API request of the usage command's flags.
func usageURI(fl caddycmd.Flags) string {
	q := url.Values{}
	for _, f := range []struct{ flag, param string }{
		{"from", "from"}, {"to", "to"}, {"group-by", "group_by"}, {"key", "key_id"}, {"owner", "owner"},
	} {
		if v := fl.String(f.flag); v != "" {
			q.Set(f.param, v)
		}
	}
	if len(q) == 0 {
		return "/modelgate/usage"
	}
	return "/modelgate/usage?" + q.Encode()
}

func cmdUsage(fl caddycmd.Flags) (int, error) {
	b, err := adminRequest(fl, http.MethodGet, usageURI(fl), nil)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("json") {
		_, err := os.Stdout.Write(b)
		return caddy.ExitCodeSuccess, err
	}
	var rep usageReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected answer from the admin API: %w", err)
	}
	return caddy.ExitCodeSuccess, writeUsageTable(os.Stdout, rep)
}

// usageColumn is a column of the usage table.
type usageColumn struct {
	head string
	cell func(r *usageRow) string
	// dim is the dimension the column shows; "" for the counts.
	dim usage.Dimension
}

func str(p *string) string {
	if p == nil || *p == "" {
		return "-"
	}
	return *p
}

func num(v int64) string { return strconv.FormatInt(v, 10) }

// usageColumns are the table's columns for rep: the dimensions grouped by,
// in a fixed order, then the counts. The counts that are zero in every
// row (cache writes, reasoning, embeddings, searches) are left out.
func usageColumns(rep usageReport) []usageColumn {
	all := []usageColumn{
		{"DAY", func(r *usageRow) string { return str(r.Day) }, usage.ByDay},
		{"KEY", func(r *usageRow) string { return str(r.KeyName) }, usage.ByKey},
		{"KEY ID", func(r *usageRow) string { return str(r.KeyID) }, usage.ByKey},
		{"OWNER", func(r *usageRow) string { return str(r.Owner) }, usage.ByOwner},
		{"MODEL", func(r *usageRow) string { return str(r.Model) }, usage.ByModel},
		{"PROVIDER", func(r *usageRow) string { return str(r.Provider) }, usage.ByProvider},
		{"TYPE", func(r *usageRow) string { return str(r.ProviderType) }, usage.ByProvider},
	}
	var cols []usageColumn
	for _, c := range all {
		if slices.Contains(rep.GroupBy, c.dim) {
			cols = append(cols, c)
		}
	}
	t := rep.Total
	for _, c := range []struct {
		head string
		show bool
		v    func(r *usageRow) int64
	}{
		{"REQUESTS", true, func(r *usageRow) int64 { return r.Requests }},
		{"INPUT", true, func(r *usageRow) int64 { return r.InputTokens }},
		{"CACHED", true, func(r *usageRow) int64 { return r.CachedTokens }},
		{"CACHE WRITE", t.CacheWriteTokens != 0, func(r *usageRow) int64 { return r.CacheWriteTokens }},
		{"OUTPUT", true, func(r *usageRow) int64 { return r.OutputTokens }},
		{"REASONING", t.ReasoningTokens != 0, func(r *usageRow) int64 { return r.ReasoningTokens }},
		{"EMBEDDING", t.EmbeddingTokens != 0, func(r *usageRow) int64 { return r.EmbeddingTokens }},
		{"SEARCHES", t.Searches != 0, func(r *usageRow) int64 { return r.Searches }},
	} {
		if c.show {
			cols = append(cols, usageColumn{head: c.head, cell: func(r *usageRow) string { return num(c.v(r)) }})
		}
	}
	return append(cols,
		usageColumn{head: "COST (USD)", cell: func(r *usageRow) string { return r.CostUSD }},
		usageColumn{head: "UNPRICED", cell: func(r *usageRow) string { return num(r.Unpriced) }})
}

// writeUsageTable prints rep as an aligned table with a TOTAL line, and
// says when the cost leaves requests out or records could not be read.
func writeUsageTable(w io.Writer, rep usageReport) error {
	by := "in total"
	if len(rep.GroupBy) > 0 {
		names := make([]string, len(rep.GroupBy))
		for i, d := range rep.GroupBy {
			names[i] = string(d)
		}
		by = "by " + strings.Join(names, ", ")
	}
	fmt.Fprintf(w, "Usage from %s to %s (UTC days, both included), %s.\n\n", rep.From, rep.To, by)
	if len(rep.Rows) == 0 {
		fmt.Fprintln(w, "No usage recorded.")
	} else {
		cols := usageColumns(rep)
		dims := 0
		for _, c := range cols {
			if c.dim != "" {
				dims++
			}
		}
		if dims == 0 { // one row, the total: a column to name it
			cols = append([]usageColumn{{head: "", dim: "total"}}, cols...)
			dims = 1
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		line := func(r *usageRow, label string) {
			cells := make([]string, len(cols))
			for i, c := range cols {
				switch {
				case i < dims && label != "":
					if i == 0 {
						cells[i] = label
					}
				default:
					cells[i] = c.cell(r)
				}
			}
			fmt.Fprintln(tw, strings.TrimRight(strings.Join(cells, "\t"), "\t"))
		}
		heads := make([]string, len(cols))
		for i, c := range cols {
			heads[i] = c.head
		}
		fmt.Fprintln(tw, strings.Join(heads, "\t"))
		if len(rep.GroupBy) > 0 {
			for i := range rep.Rows {
				line(&rep.Rows[i], "")
			}
		}
		line(&usageRow{usageCounts: rep.Total}, "TOTAL")
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if n := rep.Total.Unpriced; n > 0 {
		fmt.Fprintf(w, "\n%d %s of models without a price: %s not in COST (USD), which is a lower bound.\n",
			n, plural(n, "request", "requests"), plural(n, "its cost is", "their cost is"))
	}
	if len(rep.Incomplete) > 0 {
		fmt.Fprintf(w, "\nIncomplete: %d usage %s could not be read, and %s usage is missing:\n",
			len(rep.Incomplete), plural(int64(len(rep.Incomplete)), "record", "records"), plural(int64(len(rep.Incomplete)), "its", "their"))
		for _, name := range rep.Incomplete {
			fmt.Fprintf(w, "  %s\n", name)
		}
	}
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
