package keyadmin

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/keys"
)

// TestPolicyAPI checks GET policy: the policy of a managed key with none of
// its own, for the owner named, as the app gives it.
func TestPolicyAPI(t *testing.T) {
	f := newUsageFixture(t)
	f.app.keyPolicy = keys.Policy{Limits: &keys.Limits{RequestsPerMinute: 60}, Budget: &keys.Budget{USD: "50", Period: "month"}}
	f.app.ownPolicy = keys.Policy{Budget: &keys.Budget{USD: "500", Period: "month"}}

	status, body, _ := f.do(t, http.MethodGet, "/policy?owner=team")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	sameJSON(t, body, `{"key":{"limits":{"requests_per_minute":60},"budget":{"usd":"50","period":"month"}},
		"owner":{"budget":{"usd":"500","period":"month"}}}`)
	if k := f.app.policyKeys[len(f.app.policyKeys)-1]; k.ID == "" || k.Owner != "team" || k.Limits != nil || k.Budget != nil {
		t.Errorf("asked the app about %+v, want a managed key of owner team without a policy of its own", k)
	}

	// Without an owner: the key's defaults only.
	status, body, _ = f.do(t, http.MethodGet, "/policy")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	sameJSON(t, body, `{"key":{"limits":{"requests_per_minute":60},"budget":{"usd":"50","period":"month"}}}`)

	for _, tc := range []struct {
		name, method, target string
		status               int
		err                  string
	}{
		{"another parameter", "GET", "/policy?name=x", 400, `unknown query parameter \"name\"`},
		{"two owners", "GET", "/policy?owner=a&owner=b", 400, "invalid query parameter owner"},
		{"a POST", "POST", "/policy", 405, "method not allowed"},
	} {
		status, body, _ := f.do(t, tc.method, tc.target)
		if status != tc.status || !strings.Contains(body, `"error":"`+tc.err) {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
	}
}
