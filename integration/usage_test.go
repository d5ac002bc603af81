package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/pricing"
)

// usageRow is a row of GET /modelgate/usage grouped by key, model,
// provider and day.
type usageRow struct {
	KeyID        string `json:"key_id"`
	KeyName      string `json:"key_name"`
	Model        string `json:"model"`
	Provider     string `json:"provider"`
	ProviderType string `json:"provider_type"`
	Day          string `json:"day"`
	Requests     int64  `json:"requests"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	CostUSD      string `json:"cost_usd"`
	Unpriced     int64  `json:"unpriced_requests"`
}

// TestIntegrationUsage makes requests of two keys to two providers, one
// of a model without a price, and reads them back: GET /modelgate/usage
// grouped by key, model, provider and day, by owner, and of one key, with
// the tokens the fake provider answered and their cost at the shipped
// prices; GET /modelgate/keys/{id}/usage; and `caddy modelgate usage`.
func TestIntegrationUsage(t *testing.T) {
	startLimitsGateway(t)
	status, body, _ := admin(t, http.MethodPost, "/modelgate/keys", `{"name":"reporter","owner":"team-u"}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	managedID, managed := gjson.Get(body, "id").Str, gjson.Get(body, "key").Str
	today := time.Now().UTC().Format(time.DateOnly)

	// What the answers said, summed as the report must sum them. Rates in
	// nano-dollars a token: gpt-4o $2.50 and $10 a million, Claude Sonnet
	// 4.5 $3 and $15.
	want := map[string]*usageRow{}
	send := func(keyID, keyName, secret, model, provider, providerType string, inRate, outRate int64) {
		t.Helper()
		status, body, _ := chat(t, secret, chatBody(provider+"/"+model, "how much is this one", 12))
		if status != 200 {
			t.Fatalf("%s: %d %s", model, status, body)
		}
		in, out := gjson.Get(body, "usage.prompt_tokens").Int(), gjson.Get(body, "usage.completion_tokens").Int()
		if in == 0 || out == 0 {
			t.Fatalf("an answer without usage: %s", body)
		}
		k := keyID + " " + model
		r := want[k]
		if r == nil {
			r = &usageRow{KeyID: keyID, KeyName: keyName, Model: model, Provider: provider, ProviderType: providerType, Day: today, CostUSD: "0"}
			want[k] = r
		}
		r.Requests++
		r.InputTokens += in
		r.OutputTokens += out
		if inRate == 0 {
			r.Unpriced++
			return
		}
		cost, err := pricing.ParseMoney(r.CostUSD)
		if err != nil {
			t.Fatal(err)
		}
		r.CostUSD = (cost + pricing.Money(in*inRate+out*outRate)).String()
	}
	send("static:k-free", "k-free", freeKey, "gpt-4o", "oa", "openai", 2500, 10000)
	send("static:k-free", "k-free", freeKey, "gpt-4o", "oa", "openai", 2500, 10000)
	send("static:k-free", "k-free", freeKey, "my-own-finetune", "oa", "openai", 0, 0)
	send(managedID, "reporter", managed, "gpt-4o", "oa", "openai", 2500, 10000)
	send(managedID, "reporter", managed, "claude-sonnet-4-5", "claude", "anthropic", 3000, 15000)

	var rows []usageRow
	for _, r := range want {
		rows = append(rows, *r)
	}
	// The API's order: day, key, model.
	slices.SortFunc(rows, func(a, b usageRow) int {
		return strings.Compare(a.KeyID+" "+a.Model, b.KeyID+" "+b.Model)
	})
	var total struct {
		requests, in, out, unpriced int64
		cost                        pricing.Money
	}
	for _, r := range rows {
		c, _ := pricing.ParseMoney(r.CostUSD)
		total.requests, total.in, total.out, total.unpriced, total.cost = total.requests+r.Requests, total.in+r.InputTokens,
			total.out+r.OutputTokens, total.unpriced+r.Unpriced, total.cost+c
	}

	// Grouped by everything but the owner, over the default range (this
	// month so far): the usage of requests made on this instance is there
	// before it is flushed to the storage.
	status, body, _ = admin(t, http.MethodGet, "/modelgate/usage?group_by=key,model,provider,day", "")
	if status != 200 {
		t.Fatalf("usage: %d %s", status, body)
	}
	rep := gjson.Parse(body)
	var got []usageRow
	if err := json.Unmarshal([]byte(rep.Get("rows").Raw), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, rows) {
		t.Errorf("rows:\n got %+v\nwant %+v", got, rows)
	}
	monthStart := time.Now().UTC().Format("2006-01") + "-01"
	if rep.Get("from").Str != monthStart || rep.Get("to").Str != today || rep.Get("group_by").Raw != `["key","model","provider","day"]` ||
		rep.Get("rows.0.owner").Exists() || rep.Get("incomplete").Exists() {
		t.Errorf("the report: %s", body)
	}
	tot := rep.Get("total")
	if tot.Get("requests").Int() != total.requests || tot.Get("input_tokens").Int() != total.in || tot.Get("output_tokens").Int() != total.out ||
		tot.Get("cost_usd").Str != total.cost.String() || tot.Get("unpriced_requests").Int() != 1 {
		t.Errorf("total %s, want %+v", tot.Raw, total)
	}

	// By owner; of one key; of one owner over a day with nothing.
	status, body, _ = admin(t, http.MethodGet, "/modelgate/usage?group_by=owner&from="+monthStart+"&to="+today, "")
	if owners := gjson.Get(body, "rows.#.owner").Raw; status != 200 || owners != `["k-free","team-u"]` ||
		gjson.Get(body, `rows.#(owner=="team-u").requests`).Int() != 2 || gjson.Get(body, "rows.0.model").Exists() {
		t.Errorf("by owner: %d %s", status, body)
	}
	status, body, _ = admin(t, http.MethodGet, "/modelgate/usage?key_id="+managedID, "")
	mine := want[managedID+" gpt-4o"].CostUSD
	claude := want[managedID+" claude-sonnet-4-5"].CostUSD
	a, _ := pricing.ParseMoney(mine)
	b, _ := pricing.ParseMoney(claude)
	if status != 200 || gjson.Get(body, "rows.#").Int() != 1 || gjson.Get(body, "total.requests").Int() != 2 || gjson.Get(body, "total.cost_usd").Str != (a+b).String() {
		t.Errorf("of one key: %d %s", status, body)
	}
	yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)
	if status, body, _ = admin(t, http.MethodGet, "/modelgate/usage?owner=team-u&from="+yesterday+"&to="+yesterday, ""); status != 200 ||
		gjson.Get(body, "rows").Raw != `[]` || gjson.Get(body, "total.requests").Int() != 0 {
		t.Errorf("a day without usage: %d %s", status, body)
	}
	for _, q := range []string{"from=2026-02-30", "group_by=team", "to=" + yesterday + "&from=" + today, "key=k-free"} {
		status, body, _ := admin(t, http.MethodGet, "/modelgate/usage?"+q, "")
		if status != 400 || !strings.Contains(gjson.Get(body, "error").Str, "query parameter") {
			t.Errorf("%s: %d %s", q, status, body)
		}
	}

	// The managed key's days, as the key settings page reads them.
	status, body, _ = admin(t, http.MethodGet, "/modelgate/keys/"+managedID+"/usage?days=7", "")
	if status != 200 || gjson.Get(body, "days.#").Int() != 7 || gjson.Get(body, "days.6.day").Str != today ||
		gjson.Get(body, "days.6.requests").Int() != 2 || gjson.Get(body, "days.6.cost_usd").Str != (a+b).String() ||
		gjson.Get(body, "days.5.requests").Int() != 0 || gjson.Get(body, "key.name").Str != "reporter" || !gjson.Get(body, "status").Exists() {
		t.Errorf("the key's days: %d %s", status, body)
	}

	// caddy modelgate usage: the same report as a table, and as JSON.
	addr := []string{"--address", strings.TrimPrefix(adminURL, "http://")}
	out, errOut, ok := runCaddy(t, append([]string{"modelgate", "usage", "--group-by", "key,model"}, addr...)...)
	if !ok {
		t.Fatalf("caddy modelgate usage: %s %s", out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	cells := func(line string) []string { return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1) }
	if len(lines) < 3+len(rows)+2 || !strings.HasPrefix(lines[0], "Usage from "+monthStart+" to "+today) {
		t.Fatalf("the table:\n%s", out)
	}
	head := cells(lines[2])
	if !slices.Equal(head, []string{"KEY", "KEY ID", "MODEL", "REQUESTS", "INPUT", "CACHED", "OUTPUT", "COST (USD)", "UNPRICED"}) {
		t.Errorf("the table's head: %q", head)
	}
	for i, r := range rows {
		want := []string{r.KeyName, r.KeyID, r.Model, fmt.Sprint(r.Requests), fmt.Sprint(r.InputTokens), "0", fmt.Sprint(r.OutputTokens), r.CostUSD, fmt.Sprint(r.Unpriced)}
		if got := cells(lines[3+i]); !slices.Equal(got, want) {
			t.Errorf("row %d: %q, want %q", i, got, want)
		}
	}
	wantTotal := []string{"TOTAL", fmt.Sprint(total.requests), fmt.Sprint(total.in), "0", fmt.Sprint(total.out), total.cost.String(), "1"}
	if got := cells(lines[3+len(rows)]); !slices.Equal(got, wantTotal) {
		t.Errorf("the TOTAL line: %q, want %q", got, wantTotal)
	}
	if !strings.Contains(out, "1 request of models without a price") {
		t.Errorf("the table does not say the cost leaves a request out:\n%s", out)
	}
	out, _, ok = runCaddy(t, append([]string{"modelgate", "usage", "--json", "--group-by", "key,model,provider,day", "--from", monthStart}, addr...)...)
	var fromCLI []usageRow
	if err := json.Unmarshal([]byte(gjson.Get(out, "rows").Raw), &fromCLI); !ok || err != nil || !slices.Equal(fromCLI, rows) {
		t.Errorf("usage --json: %v %s", err, out)
	}
	out, _, ok = runCaddy(t, append([]string{"modelgate", "usage", "--group-by", "", "--owner", "team-u"}, addr...)...)
	if !ok || !regexp.MustCompile(`(?m)^TOTAL\s+2\s`).MatchString(out) {
		t.Errorf("usage of one owner in total:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "last-week"}, "invalid query parameter from"},
		{[]string{"--group-by", "team"}, "invalid query parameter group_by"},
		{[]string{"extra"}, "unknown command"},
	} {
		out, errOut, ok := runCaddy(t, append(append([]string{"modelgate", "usage"}, tc.args...), addr...)...)
		if ok || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit 0 = %v, stdout %q, stderr %q; want a failure saying %q", tc.args, ok, out, errOut, tc.want)
		}
	}

	// Where a key with limits and a budget stands after one request.
	status, body, _ = admin(t, http.MethodPost, "/modelgate/keys",
		`{"name":"limited","owner":"team-u","limits":{"requests_per_minute":10,"tokens_per_minute":5000},"budget":{"usd":"0.5","period":"day"}}`)
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, body)
	}
	limitedID := gjson.Get(body, "id").Str
	status, body, _ = chat(t, gjson.Get(body, "key").Str, chatBody("oa/gpt-4o", "one", 12))
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	tokens := gjson.Get(body, "usage.total_tokens").Int()
	cost := pricing.Money(gjson.Get(body, "usage.prompt_tokens").Int()*2500 + gjson.Get(body, "usage.completion_tokens").Int()*10000)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, body, _ = admin(t, http.MethodGet, "/modelgate/keys/"+limitedID+"/usage?days=1", "")
		if gjson.Get(body, "status.key.budget.spent_usd").Str == cost.String() || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	st := gjson.Get(body, "status.key")
	if st.Get("requests_per_minute.limit").Int() != 10 || st.Get("requests_per_minute.remaining").Int() != 9 ||
		st.Get("tokens_per_minute.remaining").Int() != 5000-tokens || st.Get("budget.spent_usd").Str != cost.String() ||
		st.Get("budget.left_usd").Str != (pricing.Dollar/2-cost).String() || st.Get("budget.reserved_usd").Str != "0" ||
		st.Get("budget.resets_at").Int() != time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour).Unix() {
		t.Errorf("where the limited key stands: %s", body)
	}
	if gjson.Get(body, "policy.key").Raw != `{"limits":{"requests_per_minute":10,"tokens_per_minute":5000},"budget":{"usd":"0.5","period":"day"}}` ||
		gjson.Get(body, "policy.owner").Raw != `{}` {
		t.Errorf("the limited key's policy: %s", body)
	}
}
