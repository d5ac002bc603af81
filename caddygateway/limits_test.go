package caddygateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/keys"
)

func TestUnmarshalLimits(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        string // the config as JSON, or the error's words
		err         bool
	}{
		{name: "defaults and names", block: `limits {
			key rpm 60 tpm 100000 concurrent 4 budget 25 month
			key ci requests_per_minute 600
			owner budget 1000.50 month
			owner research concurrent_requests 20 budget 5 day
		}`, want: `{"key":{"limits":{"requests_per_minute":60,"tokens_per_minute":100000,"concurrent_requests":4},"budget":{"usd":"25","period":"month"}},` +
			`"keys":{"ci":{"limits":{"requests_per_minute":600}}},` +
			`"owner":{"budget":{"usd":"1000.50","period":"month"}},` +
			`"owners":{"research":{"limits":{"concurrent_requests":20},"budget":{"usd":"5","period":"day"}}}}`},
		{name: "budget only", block: "limits {\n key budget 0.5 total\n}", want: `{"key":{"budget":{"usd":"0.5","period":"total"}}}`},
		{name: "argument after limits", block: "limits x {\n}", err: true, want: "wrong argument count"},
		{name: "unknown scope", block: "limits {\n team a rpm 1\n}", err: true, want: `"team" is not key, owner, allow_unpriced or leases`},
		{name: "leases off", block: "limits {\n leases off\n}", want: `{"leases":{"off":true}}`},
		{name: "leases", block: "limits {\n leases {\n life 30s\n share 8\n horizon 500ms\n idle 2s\n }\n}",
			want: `{"leases":{"life":30000000000,"share":8,"horizon":500000000,"idle":2000000000}}`},
		{name: "leases on", block: "limits {\n leases on\n}", err: true, want: `leases "on": give off, or a block`},
		{name: "leases twice", block: "limits {\n leases off\n leases off\n}", err: true, want: "leases is given twice"},
		{name: "leases unknown", block: "limits {\n leases {\n size 5\n }\n}", err: true, want: `"size" is not life, share, horizon or idle`},
		{name: "leases bad life", block: "limits {\n leases {\n life soon\n }\n}", err: true, want: `leases life "soon" is not a positive duration`},
		{name: "allow_unpriced", block: "limits {\n allow_unpriced\n owner budget 5 day\n}", want: `{"owner":{"budget":{"usd":"5","period":"day"}},"allow_unpriced":true}`},
		{name: "allow_unpriced with a value", block: "limits {\n allow_unpriced yes\n}", err: true, want: "wrong argument count"},
		{name: "nothing set", block: "limits {\n key ci\n}", err: true, want: "no limit or budget given"},
		{name: "unknown setting", block: "limits {\n key ci rpm 1 rps 2\n}", err: true, want: `unknown setting "rps"`},
		{name: "missing value", block: "limits {\n key rpm\n}", err: true, want: "rpm needs 1 value"},
		{name: "budget without period", block: "limits {\n key budget 5\n}", err: true, want: "budget needs 2 value"},
		{name: "negative", block: "limits {\n key tpm -1\n}", err: true, want: "not a whole number"},
		{name: "fraction", block: "limits {\n key rpm 1.5\n}", err: true, want: "not a whole number"},
		{name: "bad amount", block: "limits {\n key budget $5 month\n}", err: true, want: "budget.usd"},
		{name: "too many places", block: "limits {\n key budget 0.0000001 month\n}", err: true, want: "budget.usd"},
		{name: "zero budget", block: "limits {\n key budget 0.00 day\n}", err: true, want: "must be more than 0"},
		{name: "bad period", block: "limits {\n owner budget 5 week\n}", err: true, want: "budget.period"},
		{name: "default twice", block: "limits {\n key rpm 1\n key tpm 2\n}", err: true, want: "limits key (the default) is given twice"},
		{name: "name twice", block: "limits {\n owner a rpm 1\n owner a rpm 2\n}", err: true, want: "limits owner a is given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser(tc.block)
			d.Next()
			var lc LimitsConfig
			err := lc.unmarshalLimits(d)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want one saying %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(&lc)
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if err := lc.validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

func TestLimitsPolicyOrder(t *testing.T) {
	lim := func(rpm int64) *keys.Limits { return &keys.Limits{RequestsPerMinute: rpm} }
	month := func(usd string) *keys.Budget { return &keys.Budget{USD: usd, Period: "month"} }
	lc := &LimitsConfig{
		Key:    &keys.Policy{Limits: lim(10), Budget: month("1")},
		Keys:   map[string]*keys.Policy{"ci": {Limits: lim(600)}},
		Owner:  &keys.Policy{Budget: month("100")},
		Owners: map[string]*keys.Policy{"research": {Limits: lim(50)}},
	}
	for _, tc := range []struct {
		name     string
		lc       *LimitsConfig
		key      Key
		rpm      int64 // 0: no limits
		budget   string
		owner    string
		ownerRPM int64
		ownerUSD string
	}{
		{name: "static key with an entry", lc: lc, key: Key{Name: "ci"}, rpm: 600, owner: "x", ownerUSD: "100"},
		{name: "static key without one", lc: lc, key: Key{Name: "other"}, rpm: 10, budget: "1", owner: "research", ownerRPM: 50},
		// A managed key is matched by its own settings, never by a static entry of the same name.
		{name: "managed key named like a static one", lc: lc, key: Key{Name: "ci", ID: "k1"}, rpm: 10, budget: "1"},
		{name: "managed key's own limits win", lc: lc, key: Key{ID: "k1", Limits: lim(3)}, rpm: 3, budget: "1"},
		{name: "managed key's own budget wins", lc: lc, key: Key{ID: "k1", Budget: month("7")}, rpm: 10, budget: "7"},
		{name: "no config", lc: nil, key: Key{ID: "k1", Limits: lim(3)}, rpm: 3},
		{name: "nothing at all", lc: nil, key: Key{Name: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.lc.keyPolicy(&tc.key)
			var rpm int64
			if p.Limits != nil {
				rpm = p.Limits.RequestsPerMinute
			}
			var usd string
			if p.Budget != nil {
				usd = p.Budget.USD
			}
			if rpm != tc.rpm || usd != tc.budget {
				t.Errorf("key policy: rpm %d budget %q, want %d %q", rpm, usd, tc.rpm, tc.budget)
			}
			if tc.owner == "" {
				return
			}
			op := tc.lc.ownerPolicy(tc.owner)
			rpm, usd = 0, ""
			if op.Limits != nil {
				rpm = op.Limits.RequestsPerMinute
			}
			if op.Budget != nil {
				usd = op.Budget.USD
			}
			if rpm != tc.ownerRPM || usd != tc.ownerUSD {
				t.Errorf("owner %s policy: rpm %d budget %q, want %d %q", tc.owner, rpm, usd, tc.ownerRPM, tc.ownerUSD)
			}
		})
	}
}

func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"rpm 60 tpm 1000", "budget 25 month", "concurrent 2 budget 0.5 total rpm 1", "rpm", "budget 5", "rpm -1", "x 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := parsePolicy(strings.Fields(line))
		if err != nil {
			return
		}
		// What is accepted is a policy a managed key could hold, and it
		// converts to a quota budget without loss.
		if err := keys.ValidatePolicy(p); err != nil {
			t.Fatalf("%q accepted, but %v", line, err)
		}
		if p.Budget != nil {
			lc := &LimitsConfig{Key: &p}
			if err := lc.provision(); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if b := lc.budget(p.Budget); b.Amount <= 0 {
				t.Fatalf("%q: budget %+v", line, b)
			}
		}
	})
}
