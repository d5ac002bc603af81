package vertexprovider

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/caddykit"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/providertest"
	"github.com/modelgate/modelgate/providers/vertex"
)

// TestUnmarshalCaddyfile unmarshals Caddyfile blocks into the provider's
// JSON, or fails with an error of which the case gives a substring after
// "error: ".
func TestUnmarshalCaddyfile(t *testing.T) {
	caddykit.Run(t, func() caddyfile.Unmarshaler { return new(Provider) }, []struct{ Name, In, Want string }{
		{"batch gateway", `vertex {
			project p
			batch gateway
		}`, `{"project":"p","batch":"gateway"}`},
		{"service account file", `vertex {
			project my-proj
			location europe-west4
			credentials_file /etc/gateway/sa.json
			quota_project billing-proj
			models gemini-2.5-flash gemini-embedding-001
		}`, `{"models":["gemini-2.5-flash","gemini-embedding-001"],"project":"my-proj","location":"europe-west4","credentials_file":"/etc/gateway/sa.json","quota_project":"billing-proj"}`},
		{"credentials JSON from a placeholder", `vertex {
			project {env.GCP_PROJECT}
			credentials {env.GOOGLE_CREDENTIALS_JSON}
		}`, `{"project":"{env.GCP_PROJECT}","credentials":"{env.GOOGLE_CREDENTIALS_JSON}"}`},
		{"application default credentials", `vertex {
			project my-proj
		}`, `{"project":"my-proj"}`},
		{"nothing at all", `vertex`, `{}`},
		{"express mode", `vertex {
			api_key {env.VERTEX_KEY}
		}`, `{"api_key":"{env.VERTEX_KEY}"}`},
		{"base_url and proxy", `vertex {
			project p
			base_url https://europe-west4-aiplatform.googleapis.com/v1beta1
		}`, `{"base_url":"https://europe-west4-aiplatform.googleapis.com/v1beta1","project":"p"}`},
		{"file and JSON", `vertex {
			credentials_file /a.json
			credentials {env.X}
		}`, "error: credentials_file or credentials, not both"},
		{"key and credentials", `vertex {
			api_key k
			credentials_file /a.json
		}`, "error: api_key (express mode) or credentials, not both"},
		{"key and quota project", `vertex {
			api_key k
			quota_project q
		}`, "error: quota_project applies to credentials"},
		{"project twice", `vertex {
			project a
			project b
		}`, "error: project given twice"},
		{"no value", `vertex {
			location
		}`, "error: wrong argument count"},
		{"batch bucket", `vertex {
			project p
			batch_bucket gs://mg-vertex/batches/
		}`, `{"project":"p","batch_bucket":"gs://mg-vertex/batches/"}`},
		{"batch bucket from a placeholder", `vertex {
			batch_bucket {env.BUCKET}
		}`, `{"batch_bucket":"{env.BUCKET}"}`},
		{"batch bucket not Cloud Storage", `vertex {
			batch_bucket s3://mg-vertex
		}`, "error: not a Cloud Storage URI"},
		{"batch bucket name", `vertex {
			batch_bucket gs://-mg
		}`, "error: not a Cloud Storage bucket name"},
		{"batch prefix climbing", `vertex {
			batch_bucket gs://mg-vertex/../x
		}`, "error: object prefix"},
		{"batch bucket twice", `vertex {
			batch_bucket gs://a-b
			batch_bucket gs://c-d
		}`, "error: batch_bucket given twice"},
		{"batch bucket in express mode", `vertex {
			api_key k
			batch_bucket gs://mg-vertex
		}`, "error: batch_bucket needs credentials"},
		{"an Azure option", `vertex {
			api_version 2024-10-21
		}`, `error: unrecognized option "api_version" for provider type vertex`},
	})
}

// writeFile writes data to a file in a temporary directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// authenticate runs the provider type's Authenticator on a request and
// returns its headers.
func authenticate(t *testing.T, pt caddygateway.ProviderType) http.Header {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "https://aiplatform.googleapis.com/v1/x", nil)
	if err := pt.Auth.Authenticate(req, nil); err != nil {
		t.Fatal(err)
	}
	return req.Header
}

// TestSetup: each way of authenticating gives the base URL, the project,
// the token and the headers Vertex AI wants; missing or unusable
// credentials are errors naming the option, never quoting the credential.
func TestSetup(t *testing.T) {
	fake := providertest.Start(t, providertest.Options{})
	sa := fake.GoogleServiceAccount("")
	saFile := writeFile(t, "sa.json", sa)
	for _, env := range []string{"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_QUOTA_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS"} {
		t.Setenv(env, "")
	}
	t.Setenv("HOME", t.TempDir()) // no gcloud credentials
	t.Setenv("MG_SA_JSON", string(sa))
	t.Setenv("MG_SA_FILE", saFile)

	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		p             Provider
		env           map[string]string
		base, project string
		location      string
		header        map[string]string // header → prefix of its value
	}{
		{"credentials_file, the credentials' project", Provider{CredentialsFile: "{env.MG_SA_FILE}", Location: "us-central1"}, nil,
			"https://us-central1-aiplatform.googleapis.com/v1", "fake-project", "us-central1",
			map[string]string{"Authorization": "Bearer ya29.fake-", "X-Goog-User-Project": ""}},
		{"credentials JSON, global, quota project", Provider{Credentials: "{env.MG_SA_JSON}", Project: "mine", QuotaProject: "billing"}, nil,
			"https://aiplatform.googleapis.com/v1", "mine", "global",
			map[string]string{"Authorization": "Bearer ya29.fake-", "X-Goog-User-Project": "billing"}},
		{"the environment: project, location, quota project", Provider{CredentialsFile: saFile},
			map[string]string{"GOOGLE_CLOUD_PROJECT": "env-proj", "GOOGLE_CLOUD_LOCATION": "eu", "GOOGLE_CLOUD_QUOTA_PROJECT": "env-quota"},
			"https://aiplatform.eu.rep.googleapis.com/v1", "env-proj", "eu",
			map[string]string{"Authorization": "Bearer ya29.fake-", "X-Goog-User-Project": "env-quota"}},
		{"application default credentials from GOOGLE_APPLICATION_CREDENTIALS", Provider{},
			map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": saFile},
			"https://aiplatform.googleapis.com/v1", "fake-project", "global",
			map[string]string{"Authorization": "Bearer ya29.fake-"}},
		{"express mode", Provider{ProviderBase: caddygateway.ProviderBase{APIKey: "vk"}, Location: "us-central1"}, nil,
			"https://aiplatform.googleapis.com/v1", "", "us-central1", nil},
		{"a key with a project", Provider{ProviderBase: caddygateway.ProviderBase{APIKey: "vk"}, Project: "p"}, nil,
			"https://aiplatform.googleapis.com/v1", "p", "global", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			p := tc.p
			pt, err := p.setup(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pt.BaseURL != tc.base || p.chat.Google.Project != tc.project || p.chat.Google.Location != tc.location || !p.chat.Google.Vertex || p.chat.Claude.Project != tc.project || p.chat.Claude.Location != tc.location {
				t.Errorf("base %s, chat %+v", pt.BaseURL, p.chat)
			}
			if tc.header == nil {
				if pt.Auth != nil || !pt.KeyRequired || pt.KeyHeader != "x-goog-api-key" {
					t.Errorf("express mode: %+v", pt)
				}
				return
			}
			h := authenticate(t, pt)
			for k, want := range tc.header {
				if got := h.Get(k); !strings.HasPrefix(got, want) || (want == "") != (got == "") {
					t.Errorf("%s: %q, want %q", k, got, want)
				}
			}
		})
	}

	bad := writeFile(t, "bad.json", []byte(`{"type":"service_account","client_email":"a@b","private_key":"-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"}`))
	installed := writeFile(t, "client.json", []byte(`{"installed":{"client_id":"x","client_secret":"s3cret-client"}}`))
	notJSON := writeFile(t, "not.json", []byte(`private_key: s3cret`))
	for _, tc := range []struct {
		name string
		p    Provider
		want string
	}{
		{"a file that is not there", Provider{CredentialsFile: "/nonexistent/sa.json", Project: "p"}, "credentials_file: open /nonexistent/sa.json"},
		{"an empty placeholder", Provider{CredentialsFile: "{env.MG_UNSET_FILE}", Project: "p"}, "credentials_file {env.MG_UNSET_FILE} is empty"},
		{"empty JSON", Provider{Credentials: "{env.MG_UNSET_JSON}", Project: "p"}, "credentials is empty"},
		{"not JSON", Provider{CredentialsFile: notJSON, Project: "p"}, "credentials_file is not a credentials file's JSON"},
		{"an OAuth client file", Provider{CredentialsFile: installed, Project: "p"}, `credentials_file: credentials of type "" are not supported`},
		{"a broken key", Provider{CredentialsFile: bad, Project: "p"}, "credentials_file: the service account key's private_key is not a PEM-encoded RSA key"},
		{"a service account without its email", Provider{Credentials: `{"type":"service_account","private_key":"x"}`}, "credentials: the service account key has no client_email"},
		{"a location that is not one", Provider{CredentialsFile: saFile, Location: "evil.example/x#"}, "is not a Vertex AI location"},
		{"key and file", Provider{ProviderBase: caddygateway.ProviderBase{APIKey: "k"}, CredentialsFile: saFile}, "not both"},
		{"file and JSON", Provider{CredentialsFile: saFile, Credentials: "{env.MG_SA_JSON}"}, "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			_, err := p.setup(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "c2VjcmV0") {
				t.Errorf("the error quotes the credential: %v", err)
			}
		})
	}
	// batch_bucket: batch prediction over Cloud Storage with the same
	// token; none without it; a bad bucket from a placeholder is an error.
	bp := Provider{CredentialsFile: saFile, Project: "p", Location: "us-central1", BatchBucket: "gs://mg-vertex/modelgate"}
	if _, err := bp.setup(ctx); err != nil {
		t.Fatal(err)
	}
	storage, ok := bp.storage, bp.batches != nil
	if !ok || bp.BatchMode() != "native" || storage.BaseURL != "https://storage.googleapis.com" {
		t.Fatalf("storage %v %+v", ok, storage)
	}
	if h := authenticate(t, storage); !strings.HasPrefix(h.Get("Authorization"), "Bearer ya29.fake-") {
		t.Errorf("storage Authorization %q", h.Get("Authorization"))
	}
	send := func(context.Context, providers.Request) (providers.Answer, error) { return providers.Answer{}, nil }
	// The storage upstream is loaded by Provision, in native mode.
	if bp.NativeBatches(send) != nil {
		t.Error("a batch API before the storage upstream is provisioned")
	}
	bp.storageSend = send
	api, ok := bp.NativeBatches(send).(vertex.Batches)
	if !ok || api.Bucket != "mg-vertex" || api.Prefix != "modelgate" || api.Chat.Google.Project != "p" || api.Chat.Google.Location != "us-central1" || api.Control == nil || api.Storage == nil {
		t.Errorf("api %#v", api)
	}
	// batch_storage_url replaces Cloud Storage's URL; a bad one, or one
	// without a bucket, is an error.
	psc := Provider{CredentialsFile: saFile, Project: "p", BatchBucket: "gs://mg-vertex", BatchStorageURL: "https://storage-psc.p.googleapis.com"}
	if _, err := psc.setup(ctx); err != nil || psc.storage.BaseURL != "https://storage-psc.p.googleapis.com" {
		t.Errorf("batch_storage_url: %v %q", err, psc.storage.BaseURL)
	}
	for _, bad := range []Provider{
		{BatchBucket: "gs://mg-vertex", BatchStorageURL: "storage.googleapis.com"},
		{BatchBucket: "gs://mg-vertex", BatchStorageURL: "{env.MG_TEST_UNSET}"},
		{BatchStorageURL: "https://storage.googleapis.com"},
		{Batch: "native"},
	} {
		bad.CredentialsFile, bad.Project = saFile, "p"
		if _, err := bad.setup(ctx); err == nil || !strings.Contains(err.Error(), "batch") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	plain := Provider{CredentialsFile: saFile, Project: "p"}
	if _, err := plain.setup(ctx); err != nil {
		t.Fatal(err)
	}
	// Provision loads the storage upstream in native mode only.
	cctx, err := caddy.ProvisionContext(&caddy.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]bool{"": true, "native": true, "gateway": false} {
		p := Provider{CredentialsFile: saFile, Project: "p", BatchBucket: "gs://mg-vertex", Batch: mode}
		if err := p.Provision(cctx); err != nil {
			t.Fatal(err)
		}
		if got := p.NativeBatches(send) != nil; got != want {
			t.Errorf("batch %q: a batch API %v, want %v", mode, got, want)
		}
	}
	if plain.batches != nil || plain.BatchMode() != "gateway" || plain.NativeBatches(send) != nil {
		t.Error("a provider without batch_bucket has batch prediction")
	}
	t.Setenv("MG_TEST_BUCKET", "gs://Bad")
	if _, err := (&Provider{CredentialsFile: saFile, Project: "p", BatchBucket: "{env.MG_TEST_BUCKET}"}).setup(ctx); err == nil || !strings.Contains(err.Error(), "batch_bucket") {
		t.Errorf("a bad bucket from a placeholder: %v", err)
	}
	if _, err := (&Provider{ProviderBase: caddygateway.ProviderBase{APIKey: "k"}, BatchBucket: "gs://mg-vertex"}).setup(ctx); err == nil || !strings.Contains(err.Error(), "batch_bucket needs credentials") {
		t.Errorf("express mode with a bucket: %v", err)
	}
	if _, err := (&Provider{ProviderBase: caddygateway.ProviderBase{APIKey: "k"}, Batch: "native"}).setup(ctx); err == nil || !strings.Contains(err.Error(), "batch_bucket needs credentials") {
		t.Errorf("express mode with batch native: %v", err)
	}

	// A project is needed, from somewhere.
	p := Provider{Credentials: `{"type":"authorized_user","client_id":"c","client_secret":"s","refresh_token":"r"}`}
	if _, err := p.setup(ctx); err == nil || !strings.Contains(err.Error(), "project is required") {
		t.Errorf("no project: %v", err)
	}
}

// TestTokensReplacedBeforeExpiry: the gateway keeps an access token while
// it has more than caddygateway.TokenEarlyExpiry to live, and then fetches
// a new one while the old one is still valid, rather than letting
// x/oauth2's own cache hand out the old one until its last 10 seconds.
func TestTokensReplacedBeforeExpiry(t *testing.T) {
	fake := providertest.Start(t, providertest.Options{GoogleTokenLifetime: caddygateway.TokenEarlyExpiry + 2*time.Second})
	p := Provider{CredentialsFile: writeFile(t, "sa.json", fake.GoogleServiceAccount("")), Location: "us-central1"}
	pt, err := p.setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first := authenticate(t, pt).Get("Authorization")
	if again := authenticate(t, pt).Get("Authorization"); again != first || len(fake.GoogleTokens()) != 1 {
		t.Fatalf("a valid token was not reused: %s then %s, %d issued", first, again, len(fake.GoogleTokens()))
	}
	time.Sleep(2100 * time.Millisecond)
	second := authenticate(t, pt).Get("Authorization")
	tokens := fake.GoogleTokens()
	if second == first || len(tokens) != 2 || "Bearer "+tokens[1].Token != second {
		t.Fatalf("no new token when the first had less than %v to live: %s then %s, issued %+v", caddygateway.TokenEarlyExpiry, first, second, tokens)
	}
	if !time.Now().Before(tokens[0].Expiry) {
		t.Errorf("the first token was replaced only after it expired")
	}
	if third := authenticate(t, pt).Get("Authorization"); third != second || len(fake.GoogleTokens()) != 2 {
		t.Errorf("the new token was not reused: %s", third)
	}
}

// metadataServer is a GCE/GKE metadata server: the project and the default
// service account's tokens, for requests that carry Metadata-Flavor.
type metadataServer struct {
	issued   atomic.Int64
	lifetime int // expires_in of its tokens, seconds
}

func (s *metadataServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "missing Metadata-Flavor", http.StatusForbidden)
		return
	}
	w.Header().Set("Metadata-Flavor", "Google")
	switch r.URL.Path {
	case "/computeMetadata/v1/project/project-id":
		_, _ = w.Write([]byte("gke-project"))
	case "/computeMetadata/v1/instance/service-accounts/default/token":
		if !strings.Contains(r.URL.Query().Get("scopes"), "cloud-platform") {
			http.Error(w, "no scope", http.StatusBadRequest)
			return
		}
		n := s.issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "ya29.metadata-" + string(rune('0'+n)), "expires_in": s.lifetime, "token_type": "Bearer"})
	default:
		http.NotFound(w, r)
	}
}

// TestMetadataServer: with no credentials configured and none in the
// environment, Application Default Credentials come from the metadata
// server (GKE workload identity, Cloud Run, GCE), with its project.
//
// The metadata server caches a token until about four minutes before it
// expires, so it may hand one out with less than TokenEarlyExpiry to live:
// such a token serves until Google's own margin for the metadata server
// (metadataEarlyRefresh), rather than sending every request to the server.
func TestMetadataServer(t *testing.T) {
	ms := &metadataServer{lifetime: int(caddygateway.TokenEarlyExpiry/time.Second) - 20}
	srv := httptest.NewServer(ms)
	defer srv.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("GOOGLE_CLOUD_PROJECT", "")
	t.Setenv("HOME", t.TempDir())
	var p Provider
	pt, err := p.setup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.chat.Google.Project != "gke-project" {
		t.Errorf("project %q", p.chat.Google.Project)
	}
	for range 3 {
		if got := authenticate(t, pt).Get("Authorization"); got != "Bearer ya29.metadata-1" {
			t.Fatalf("Authorization %q", got)
		}
	}
	if n := ms.issued.Load(); n != 1 {
		t.Errorf("%d tokens fetched; one with %d s to live serves every request", n, ms.lifetime)
	}
}
