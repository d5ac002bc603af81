package integration

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/certmagic"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/state"
)

// TestKeyCreatedBeforeSubscriptionLive: an instance loads its managed keys
// when its config is provisioned, and subscribes to the other instances'
// messages after it starts. A key created elsewhere in between sends its
// message to nobody here; the instance must catch up once its subscription
// is live, not at its next key_refresh (ten minutes here). CI once caught
// this with three instances on Redis: a key created on one was refused by
// another for as long as the test waited.
func TestKeyCreatedBeforeSubscriptionLive(t *testing.T) {
	fake := providertest.Start(t, providertest.Options{OpenAIKey: openAIKey})
	dir := storageDir(t)
	cfg := `{
	admin localhost:2999
	http_port 9080
	https_port 9443
	grace_period 1ns
	skip_install_trust
	log {
		output file ` + t.TempDir() + `/caddy.log
	}
	modelgate {
		provider oa openai {
			batch gateway
			base_url ` + fake.URL + `/v1
			api_key ` + openAIKey + `
			models gpt-4o-mini
		}
		key_refresh 10m
	}
}
http://localhost:9080 {
	modelgate_auth
	modelgate
}`
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same files, offering a shared state whose subscriptions go live
	// only when the test says so.
	gate := make(chan struct{})
	gatedSubscribe.Store(&gate)
	t.Cleanup(func() { gatedSubscribe.Store(nil) })
	adapted, err = sjson.SetBytes(adapted, "apps.modelgate.storage", map[string]string{"module": "modelgate_test_gated", "root": dir})
	if err != nil {
		t.Fatal(err)
	}
	caddytest.NewTester(t).InitServer(string(adapted), "json")

	// Another instance creates a key while this one's subscription is
	// not live yet.
	_, secret, err := keys.NewManager(&certmagic.FileStorage{Path: dir}, "modelgate").Create(context.Background(), keys.NewKey{Name: "early", Owner: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if status := getWith(t, "/v1/models", secret); status != http.StatusUnauthorized {
		t.Fatalf("a key created after the keys were loaded, before any refresh: %d, want 401", status)
	}
	close(gate)
	took := waitStatusWith(t, gatewayBase+"/v1/models", secret, http.StatusOK, 5*time.Second, "the key to work once the subscription is live")
	t.Logf("the key worked %v after the subscription went live", took.Round(time.Millisecond))
}

// gatedSubscribe holds the gate of gatedStorage's subscriptions: closed,
// they subscribe.
var gatedSubscribe atomic.Pointer[chan struct{}]

func init() { caddy.RegisterModule(gatedStorage{}) }

// gatedStorage is caddy.storage.file_system offering shared state: an
// in-process state whose Subscribe waits for gatedSubscribe.
type gatedStorage struct {
	Root string `json:"root"`
}

func (gatedStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.storage.modelgate_test_gated", New: func() caddy.Module { return new(gatedStorage) }}
}

func (s *gatedStorage) CertMagicStorage() (certmagic.Storage, error) {
	return gatedFiles{&certmagic.FileStorage{Path: s.Root}}, nil
}

type gatedFiles struct{ *certmagic.FileStorage }

func (gatedFiles) SharedState(*zap.Logger) (state.State, error) {
	return gatedState{state.NewLocal()}, nil
}

type gatedState struct{ *state.Local }

func (g gatedState) Subscribe(ctx context.Context, channels ...string) (state.Subscription, error) {
	if gate := gatedSubscribe.Load(); gate != nil {
		select {
		case <-*gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Local.Subscribe(ctx, channels...)
}
