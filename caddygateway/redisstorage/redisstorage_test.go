package redisstorage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddypki" // the pki app: Caddy's own storage user
	"github.com/redis/go-redis/v9"

	"github.com/modelgate/modelgate/caddygateway/redisstorage"
	"github.com/modelgate/modelgate/internal/redistest"
)

func provision(t *testing.T, raw string) *redisstorage.Storage {
	t.Helper()
	var s redisstorage.Storage
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cleanup() })
	return &s
}

// Placeholders in the address and the credentials are resolved; the
// storage works against a password-protected Redis; String never shows
// the password.
func TestProvisionWithPlaceholders(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Password: "pa55-w0rd"})
	t.Setenv("MG_TEST_REDIS_ADDR", srv.Addr)
	t.Setenv("MG_TEST_REDIS_PASSWORD", "pa55-w0rd")
	s := provision(t, `{"addresses":["{env.MG_TEST_REDIS_ADDR}"],"password":"{env.MG_TEST_REDIS_PASSWORD}",
		"key_prefix":"gw1","timeout":"1s","lock_ttl":"5s"}`)
	cm, err := s.CertMagicStorage()
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.Store(context.Background(), "certificates/x/x.crt", []byte("pem")); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: "pa55-w0rd"})
	defer rdb.Close()
	if v, _ := rdb.HGet(context.Background(), "{gw1}:f:certificates/x/x.crt", "v").Result(); v != "pem" {
		t.Fatalf("value in Redis = %q", v)
	}
	str := s.String()
	if strings.Contains(str, "pa55") || !strings.Contains(str, "[REDACTED]") || !strings.Contains(str, srv.Addr) {
		t.Fatalf("String() = %q", str)
	}
	// The config itself keeps the placeholder, not the secret.
	out, _ := json.Marshal(s)
	if strings.Contains(string(out), "pa55") {
		t.Fatalf("marshalled config holds the secret: %s", out)
	}
}

func TestValidateRefuses(t *testing.T) {
	for _, raw := range []string{
		`{"addresses":["no-port"]}`,
		`{"addresses":["a:1","b:2"],"db":3}`,
		`{"master_name":"m","cluster":true}`,
		`{"key_prefix":"a{b}"}`,
		`{"lock_ttl":"100ms"}`,
		`{"tls":{"client_cert":"/x.pem"}}`,
	} {
		var s redisstorage.Storage
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := s.Provision(ctx)
		cancel()
		if err == nil {
			_ = s.Cleanup()
			t.Errorf("%s: provisioned", raw)
		}
	}
}

// Module instances with equal connection options share one client, so a
// config reload does not reconnect; the last Cleanup closes it.
func TestClientSharedAcrossReloads(t *testing.T) {
	srv := redistest.Start(t)
	raw := fmt.Sprintf(`{"addresses":[%q]}`, srv.Addr)
	old := provision(t, raw)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var next redisstorage.Storage
	_ = json.Unmarshal([]byte(fmt.Sprintf(`{"addresses":[%q],"key_prefix":"other"}`, srv.Addr)), &next)
	if err := next.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if old.Client() != next.Client() {
		t.Fatal("equal connection options got two clients")
	}
	client := next.Client()
	_ = old.Cleanup() // the old config goes
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the client closed while the new config uses it: %v", err)
	}
	_ = next.Cleanup()
	if err := client.Ping(context.Background()).Err(); err == nil {
		t.Fatal("the client stayed open after its last user left")
	}
}

// Caddy itself runs on the module: the pki app keeps its local CA in
// storage, and with `storage modelgate_redis` it lands in Redis.
func TestCaddyKeepsItsPKIInRedis(t *testing.T) {
	srv := redistest.Start(t)
	cfg := fmt.Sprintf(`{
		"admin": {"disabled": true},
		"logging": {"logs": {"default": {"level": "ERROR"}}},
		"storage": {"module": "modelgate_redis", "addresses": [%q], "key_prefix": "caddy-test"},
		"apps": {"pki": {"certificate_authorities": {"local": {"install_trust": false}}}}
	}`, srv.Addr)
	if err := caddy.Load([]byte(cfg), true); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = caddy.Stop() }()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, _ := rdb.Exists(context.Background(), "{caddy-test}:f:pki/authorities/local/root.crt").Result()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			keys, _ := rdb.Keys(context.Background(), "*").Result()
			t.Fatalf("no root certificate in Redis; keys: %v", keys)
		}
		time.Sleep(50 * time.Millisecond)
	}
	members, _ := rdb.SMembers(context.Background(), "{caddy-test}:d:pki/authorities/local").Result()
	if len(members) < 2 {
		t.Fatalf("the CA's folder lists %v", members)
	}
}
