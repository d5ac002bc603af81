package azureprovider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddykit"
)

// TestUnmarshalCaddyfile unmarshals Caddyfile blocks into the provider's
// JSON, or fails with an error of which the case gives a substring after
// "error: ".
func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(Provider) }, []struct{ Name, In, Want string }{
		{"batch native", `azure_openai {
			base_url https://res.openai.azure.com
			api_key k
			batch native
		}`, `{"base_url":"https://res.openai.azure.com","api_key":"k","batch":"native"}`},
		{"key, classic, deployments", `azure_openai {
			base_url https://res.openai.azure.com
			api_key {env.AZ}
			api_version 2024-10-21
			deployment gpt-4o prod-4o
			deployment gpt-4o-mini prod-mini
		}`, `{"base_url":"https://res.openai.azure.com","api_key":"{env.AZ}","api_version":"2024-10-21","deployments":{"gpt-4o":"prod-4o","gpt-4o-mini":"prod-mini"}}`},
		{"entra service principal", `azure_openai {
			base_url https://res.openai.azure.com
			entra {
				tenant_id t
				client_id c
				client_secret {env.S}
			}
		}`, `{"base_url":"https://res.openai.azure.com","entra":{"tenant_id":"t","client_id":"c","client_secret":"{env.S}"}}`},
		{"entra managed identity", `azure_openai {
			base_url https://res.openai.azure.com
			entra {
				managed_identity
			}
		}`, `{"base_url":"https://res.openai.azure.com","entra":{"managed_identity":true}}`},
		{"neither", `azure_openai {
			base_url https://res.openai.azure.com
		}`, "error: exactly one of api_key and entra"},
		{"both", `azure_openai {
			base_url https://res.openai.azure.com
			api_key k
			entra {
				managed_identity
			}
		}`, "error: exactly one of api_key and entra"},
		{"no base_url", `azure_openai {
			api_key k
		}`, "error: needs base_url"},
		{"deployment twice", `azure_openai {
			base_url https://x
			api_key k
			deployment a b
			deployment a c
		}`, "error: given twice"},
		{"unknown entra option", `azure_openai {
			base_url https://x
			entra {
				password p
			}
		}`, `error: unrecognized entra option "password"`},
	})
}

// tokenServer is an Entra ID token endpoint and an instance metadata
// service: it records what each request asked and issues tokens valid for
// ttl.
type tokenServer struct {
	mu   sync.Mutex
	seen []string
	ttl  time.Duration
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	s.mu.Lock()
	s.seen = append(s.seen, r.URL.Path+" "+r.Form.Encode()+" metadata="+r.Header.Get("Metadata"))
	n := len(s.seen)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/imds") {
		// IMDS sends expires_on as a string of Unix seconds.
		_ = json.NewEncoder(w).Encode(map[string]string{"access_token": "mi-token", "token_type": "Bearer",
			"expires_on": strconv.FormatInt(time.Now().Add(s.ttl).Unix(), 10)})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "sp-token-" + string(rune('0'+n)), "token_type": "Bearer", "expires_in": int(s.ttl.Seconds())})
}

func TestEntraTokenSources(t *testing.T) {
	ts := &tokenServer{ttl: time.Hour}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "federated")
	if err := os.WriteFile(tokenFile, []byte("federated-jwt-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AZURE_TENANT_ID", "tenant-from-env")
	t.Setenv("MG_AZ_SECRET", "s3cret")
	for _, tc := range []struct {
		name  string
		e     Entra
		token string
		seen  []string // substrings of the token request
	}{
		{"client secret", Entra{Authority: srv.URL, ClientID: "app", ClientSecret: "{env.MG_AZ_SECRET}"}, "sp-token-1",
			[]string{"/tenant-from-env/oauth2/v2.0/token", "client_id=app", "client_secret=s3cret", "grant_type=client_credentials",
				"scope=https%3A%2F%2Fcognitiveservices.azure.com%2F.default"}},
		{"workload identity", Entra{Authority: srv.URL, TenantID: "t2", ClientID: "app", FederatedTokenFile: tokenFile, Scope: "https://ai.azure.com/.default"}, "sp-token-2",
			[]string{"/t2/oauth2/v2.0/token", "client_assertion=federated-jwt-1", "client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer",
				"scope=https%3A%2F%2Fai.azure.com%2F.default"}},
		{"managed identity", Entra{ManagedIdentity: true, ClientID: "uami", IMDSEndpoint: srv.URL + "/imds"}, "mi-token",
			[]string{"/imds ", "client_id=uami", "resource=https%3A%2F%2Fcognitiveservices.azure.com", "metadata=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := tc.e.tokenSource(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tok, err := src.Token()
			if err != nil {
				t.Fatal(err)
			}
			if tok.AccessToken != tc.token || time.Until(tok.Expiry) < 50*time.Minute {
				t.Errorf("token %q expiring %v", tok.AccessToken, tok.Expiry)
			}
			ts.mu.Lock()
			last := ts.seen[len(ts.seen)-1]
			ts.mu.Unlock()
			for _, s := range tc.seen {
				if !strings.Contains(last, s) {
					t.Errorf("token request %q lacks %q", last, s)
				}
			}
		})
	}
	for _, bad := range []Entra{
		{},
		{ClientSecret: "s", ManagedIdentity: true},
		{ClientSecret: "s", ClientID: "c", TenantID: "{env.MG_UNSET_TENANT}", Authority: srv.URL},
	} {
		if bad.TenantID != "" {
			t.Setenv("AZURE_TENANT_ID", "")
		}
		if _, err := bad.tokenSource(context.Background()); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
