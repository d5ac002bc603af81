// Package vertexprovider is the Caddy module of the vertex provider type,
// modelgate.providers.vertex: Google Cloud's Vertex AI, Gemini behind the
// translator of package providers/gemini (chat and embeddings) and Claude
// behind Anthropic's (chat, and the Messages API passed through), as
// package providers/vertex puts them together, with credentials from
// golang.org/x/oauth2/google.
package vertexprovider

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/anthropic"
	"github.com/modelgate/modelgate/providers/gemini"
	"github.com/modelgate/modelgate/providers/vertex"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is Vertex AI. Requests for Google's models go to
// {base}/projects/{project}/locations/{location}/publishers/google/models/
// {model}:generateContent (and :streamGenerateContent, :predict,
// :embedContent); for Anthropic's Claude models (names that start with
// claude-) to …/publishers/anthropic/models/{model}:rawPredict (and
// :streamRawPredict) with Anthropic's Messages body, which /v1/messages
// passes through untouched; each with an OAuth 2 access token of the
// cloud-platform scope,
// taken from a credentials file, credentials JSON, or Application Default
// Credentials, cached and replaced before it expires. With api_key instead,
// Vertex AI's express mode: the key in x-goog-api-key and, without a
// project, the paths /publishers/google/models/{model}:….
type Provider struct {
	caddygateway.ProviderBase

	// Project is the Google Cloud project. Placeholders are resolved.
	// Default: {env.GOOGLE_CLOUD_PROJECT}, else the credentials' project
	// (a service account's project_id, the metadata server's project).
	// Not needed in express mode.
	Project string `json:"project,omitempty"`

	// Location is the Vertex AI location: "global", a multi-region ("us",
	// "eu") or a region ("us-central1"). It picks the default base URL
	// (gemini.VertexBaseURL). Default: {env.GOOGLE_CLOUD_LOCATION}, else
	// global.
	Location string `json:"location,omitempty"`

	// CredentialsFile is the path of a credentials file: a service
	// account key, or any other credential file golang.org/x/oauth2/google
	// reads (authorized_user from gcloud, external_account for workload
	// identity federation, impersonated_service_account). Placeholders
	// are resolved.
	CredentialsFile string `json:"credentials_file,omitempty"`

	// Credentials is the JSON of such a file, usually a placeholder
	// ({env.GOOGLE_CREDENTIALS_JSON}, {file./run/secrets/sa.json}).
	// Without CredentialsFile, Credentials and api_key, Application
	// Default Credentials are used: GOOGLE_APPLICATION_CREDENTIALS,
	// gcloud's application_default_credentials.json, then the GCE/GKE
	// metadata server (workload identity included).
	Credentials string `json:"credentials,omitempty"`

	// QuotaProject is sent as X-Goog-User-Project, the project billed and
	// whose quota counts. Default: {env.GOOGLE_CLOUD_QUOTA_PROJECT}, else
	// the credentials' quota_project_id (gcloud's user credentials carry
	// one), else none.
	QuotaProject string `json:"quota_project,omitempty"`

	// BatchBucket is where Vertex AI batch prediction reads its input and
	// writes its output, gs://bucket[/prefix]. With it, the batch lines
	// of Gemini models go to batch prediction jobs of the project and
	// location; without it, all of this provider's batch lines run in the
	// gateway. It needs credentials (not api_key). Placeholders are
	// resolved.
	BatchBucket string `json:"batch_bucket,omitempty"`

	// BatchStorageURL is where batch prediction's input and output go
	// through Cloud Storage's JSON API: a Private Service Connect
	// endpoint, say. Default: https://storage.googleapis.com.
	// Placeholders are resolved.
	BatchStorageURL string `json:"batch_storage_url,omitempty"`

	// Batch is where batches send this provider's lines: "native", to
	// its own batch API at its batch price, or "gateway", as live
	// requests. Default: native.
	Batch string `json:"batch,omitempty"`

	chat vertex.Chat

	// batches is batch prediction without its Sends, and storage the
	// Cloud Storage service it calls; set when batch_bucket is.
	// storageSend carries requests to it, provisioned when the batch
	// mode is native.
	batches     *vertex.Batches
	storage     caddygateway.ProviderType
	storageSend providers.Send
}

// expressBaseURL is the base URL of requests authenticated with an API key,
// whatever the location, as go-genai sends them.
const expressBaseURL = "https://aiplatform.googleapis.com/v1"

// tokenTimeout bounds one token request to Google (or the metadata server).
const tokenTimeout = 30 * time.Second

// metadataEarlyRefresh is how long before expiry a token from the metadata
// server is replaced: Google's own choice for its metadata token source,
// which caches tokens for at least four minutes.
const metadataEarlyRefresh = 225 * time.Second

// location is a Vertex AI location; it becomes part of the default base
// URL's host name, so nothing else passes.
var location = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// providerType describes the type to the host; Provision completes it.
var providerType = caddygateway.ProviderType{Name: "vertex"}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.vertex",
		New: func() caddy.Module { return new(Provider) },
	}
}

// Provision reads the credentials, sets up the translator and the reverse
// proxy to the provider.
func (p *Provider) Provision(ctx caddy.Context) error {
	t, err := p.setup(ctx)
	if err != nil {
		return fmt.Errorf("vertex: %w", err)
	}
	if err := p.ProvisionBase(ctx, t); err != nil {
		return err
	}
	if p.batches != nil && p.BatchMode() == batch.ModeNative {
		if p.storageSend, err = caddygateway.ProvisionService(ctx, p.storage); err != nil {
			return fmt.Errorf("vertex: batch storage: %w", err)
		}
	}
	return nil
}

// setup resolves the options and reads the credentials: it returns the
// provider type as ProvisionBase wants it and sets up the translator.
func (p *Provider) setup(ctx context.Context) (caddygateway.ProviderType, error) {
	t := providerType
	repl := caddy.NewReplacer()
	get := func(v, env string) string {
		if v == "" {
			v = "{env." + env + "}"
		}
		return repl.ReplaceKnown(v, "")
	}
	project := get(p.Project, "GOOGLE_CLOUD_PROJECT")
	loc := get(p.Location, "GOOGLE_CLOUD_LOCATION")
	if loc == "" {
		loc = "global"
	}
	if !location.MatchString(loc) {
		return t, fmt.Errorf("location %q is not a Vertex AI location (such as global, us, eu, us-central1)", loc)
	}
	if p.APIKey != "" {
		switch {
		case p.CredentialsFile != "" || p.Credentials != "":
			return t, errors.New("give api_key (express mode) or credentials, not both")
		case p.QuotaProject != "":
			return t, errors.New("quota_project applies to credentials, not to api_key")
		case p.BatchBucket != "" || p.BatchStorageURL != "" || p.Batch == batch.ModeNative:
			return t, errors.New("batch_bucket needs credentials: express mode (api_key) has no batch prediction")
		}
		t.KeyRequired, t.KeyHeader, t.BaseURL = true, "x-goog-api-key", expressBaseURL
		p.chat = chat(project, loc)
		return t, nil
	}

	creds, err := p.credentials(ctx)
	if err != nil {
		return t, err
	}
	if project == "" {
		project = creds.project
	}
	if project == "" {
		return t, errors.New("project is required: set project, GOOGLE_CLOUD_PROJECT, or use credentials that name one")
	}
	quota := get(p.QuotaProject, "GOOGLE_CLOUD_QUOTA_PROJECT")
	if quota == "" {
		quota = creds.quotaProject
	}
	auth := googleAuth{tokens: caddygateway.NewTokenAuth(creds.source), quotaProject: quota}
	t.Auth = auth
	t.BaseURL = gemini.VertexBaseURL(loc)
	p.chat = chat(project, loc)
	return t, p.setupBatches(auth)
}

// setupBatches sets up batch prediction when batch_bucket is given: its
// API, and Cloud Storage's JSON API, which its input and output go
// through, with the provider's credentials (their cloud-platform scope
// covers it).
func (p *Provider) setupBatches(auth caddygateway.Authenticator) error {
	repl := caddy.NewReplacer()
	if p.BatchBucket == "" {
		if p.BatchStorageURL != "" {
			return errors.New("batch_storage_url needs batch_bucket")
		}
		if p.Batch == batch.ModeNative {
			return errors.New("batch native needs batch_bucket")
		}
		return nil
	}
	bucket, prefix, err := vertex.ParseGCSURI(repl.ReplaceKnown(p.BatchBucket, ""))
	if err != nil {
		return fmt.Errorf("batch_bucket: %w", err)
	}
	storage := storageURL
	if p.BatchStorageURL != "" {
		if storage = repl.ReplaceKnown(p.BatchStorageURL, ""); storage == "" {
			return fmt.Errorf("batch_storage_url %s is empty (is the environment variable set?)", p.BatchStorageURL)
		}
		if _, err := caddygateway.ParseBaseURL("batch_storage_url", storage); err != nil {
			return err
		}
	}
	p.batches = &vertex.Batches{Bucket: bucket, Prefix: prefix, Chat: p.chat}
	p.storage = caddygateway.ProviderType{Name: "vertex", BaseURL: storage, Auth: auth}
	return nil
}

// storageURL is Cloud Storage's JSON API, which batch prediction's input
// and output go through.
const storageURL = "https://storage.googleapis.com"

// NativeBatches is Vertex AI batch prediction for the batch engine
// (caddygateway.NativeBatcher): its jobs go through send, the provider's
// own upstream (that of its live requests, below its base URL …/v1), its
// objects through the Cloud Storage upstream Provision loaded. Nil when
// the provider has no batch_bucket or its batch mode is gateway.
func (p *Provider) NativeBatches(send providers.Send) batch.NativeAPI {
	if p.batches == nil || p.storageSend == nil {
		return nil
	}
	b := *p.batches
	b.Control, b.Storage = send, p.storageSend
	return b
}

// chat is the translator of both publishers for project and location.
// Claude needs a project: in express mode (no project) its models are
// refused.
func chat(project, location string) vertex.Chat {
	return vertex.Chat{
		Google: gemini.Chat{Vertex: true, Project: project, Location: location},
		Claude: anthropic.Vertex{Project: project, Location: location},
	}
}

// credentials are what the gateway authenticates to Vertex AI with. The
// source is x/oauth2's, which caches its token; caddygateway.NewTokenAuth
// caches it in turn and asks for a new one TokenEarlyExpiry before it
// expires, which x/oauth2's cache then fetches (TestTokensReplacedBeforeExpiry).
type credentials struct {
	source       oauth2.TokenSource
	project      string // the project the credentials name, if any
	quotaProject string // their quota_project_id, if any
}

// credentialTypes are the credential files taken, by their "type". Others
// (an OAuth client's "installed" or "web" file) would need a person to sign
// in.
var credentialTypes = map[string]bool{
	string(google.ServiceAccount): true, string(google.AuthorizedUser): true, string(google.ExternalAccount): true,
	string(google.ExternalAccountAuthorizedUser): true, string(google.ImpersonatedServiceAccount): true,
}

// credentials reads credentials_file, or credentials, or finds Application
// Default Credentials. What it reads never appears in an error.
func (p *Provider) credentials(ctx context.Context) (credentials, error) {
	repl := caddy.NewReplacer()
	// Token requests belong to the config, not to a client's request, and
	// end with it; each is bounded.
	tokenCtx := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, &http.Client{Timeout: tokenTimeout})
	params := google.CredentialsParams{Scopes: []string{gemini.VertexScope}, EarlyTokenRefresh: metadataEarlyRefresh}
	var data []byte
	option := "credentials"
	switch {
	case p.CredentialsFile != "" && p.Credentials != "":
		return credentials{}, errors.New("give credentials_file or credentials, not both")
	case p.CredentialsFile != "":
		option = "credentials_file"
		path := repl.ReplaceKnown(p.CredentialsFile, "")
		if path == "" {
			return credentials{}, fmt.Errorf("credentials_file %s is empty (is the environment variable set?)", p.CredentialsFile)
		}
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return credentials{}, fmt.Errorf("credentials_file: %w", err)
		}
	case p.Credentials != "":
		if data = []byte(repl.ReplaceKnown(p.Credentials, "")); len(data) == 0 {
			return credentials{}, errors.New("credentials is empty (is the placeholder's variable or file set?)")
		}
	default:
		found, err := google.FindDefaultCredentialsWithParams(tokenCtx, params)
		if err != nil {
			return credentials{}, fmt.Errorf("no credentials_file, credentials or api_key, and no Application Default Credentials: %w", err)
		}
		if found.JSON == nil {
			// The metadata server: its source caches each token and
			// replaces it metadataEarlyRefresh before it expires.
			return credentials{source: copySource{found.TokenSource}, project: found.ProjectID}, nil
		}
		option, data = "Application Default Credentials", found.JSON
	}
	return fromJSON(tokenCtx, option, data, params)
}

// fromJSON checks a credentials file's JSON and makes its token source.
func fromJSON(ctx context.Context, option string, data []byte, params google.CredentialsParams) (credentials, error) {
	var f struct {
		Type           string `json:"type"`
		ProjectID      string `json:"project_id"`
		QuotaProjectID string `json:"quota_project_id"`
		ClientEmail    string `json:"client_email"`
		PrivateKey     string `json:"private_key"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return credentials{}, fmt.Errorf("%s is not a credentials file's JSON", option)
	}
	if !credentialTypes[f.Type] {
		return credentials{}, fmt.Errorf("%s: credentials of type %q are not supported (use a service account key, or authorized_user, external_account, impersonated_service_account credentials)", option, f.Type)
	}
	if f.Type == string(google.ServiceAccount) {
		if f.ClientEmail == "" {
			return credentials{}, fmt.Errorf("%s: the service account key has no client_email", option)
		}
		if !privateKey(f.PrivateKey) {
			return credentials{}, fmt.Errorf("%s: the service account key's private_key is not a PEM-encoded RSA key", option)
		}
	}
	creds, err := google.CredentialsFromJSONWithTypeAndParams(ctx, data, google.CredentialsType(f.Type), params)
	if err != nil {
		return credentials{}, fmt.Errorf("%s: the credentials cannot be used: %w", option, err)
	}
	return credentials{source: creds.TokenSource, project: creds.ProjectID, quotaProject: f.QuotaProjectID}, nil
}

// privateKey reports whether s is a PEM-encoded RSA private key, PKCS#8 or
// PKCS#1, as Google's service account keys are.
func privateKey(s string) bool {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return false
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return true
	}
	_, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	return err == nil
}

// copySource hands out copies of its source's tokens. NewTokenAuth's cache
// sets its own expiry margin on the tokens it keeps; on a copy, that margin
// does not reach the cache of the metadata server's source, which keeps
// Google's (metadataEarlyRefresh). Otherwise a token the metadata server
// hands out with less than TokenEarlyExpiry to live (it caches tokens until
// about four minutes before they expire) would send every request to it.
type copySource struct{ src oauth2.TokenSource }

func (s copySource) Token() (*oauth2.Token, error) {
	t, err := s.src.Token()
	if err != nil {
		return nil, err
	}
	c := *t
	return &c, nil
}

// googleAuth sends the access token, and the quota project when there is
// one.
type googleAuth struct {
	tokens       caddygateway.TokenAuth
	quotaProject string
}

// Authenticate sets Authorization and X-Goog-User-Project.
func (a googleAuth) Authenticate(req *http.Request, body []byte) error {
	if err := a.tokens.Authenticate(req, body); err != nil {
		return err
	}
	if a.quotaProject != "" {
		req.Header.Set("X-Goog-User-Project", a.quotaProject)
	}
	return nil
}

// UnmarshalCaddyfile reads a Vertex AI provider block. Syntax:
//
//	provider <name> vertex {
//	    project          <project>
//	    location         <location>   # default global
//	    credentials_file <path>       # or:
//	    credentials      <json>       # e.g. {env.GOOGLE_CREDENTIALS_JSON}
//	    quota_project    <project>
//	    batch            native|gateway
//	    batch_bucket     gs://<bucket>[/<prefix>]
//	    batch_storage_url <url>       # default https://storage.googleapis.com
//	    api_key          <secret>     # express mode, instead of credentials
//	    base_url         <url>        # default: by location
//	    models           <model>...
//	    proxy { <reverse_proxy subdirectives> }
//	}
//
// Without credentials_file, credentials and api_key, Application Default
// Credentials are used.
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
		switch d.Val() {
		case "batch":
			return true, caddygateway.ParseBatchMode(d, &p.Batch)
		case "batch_bucket":
			if p.BatchBucket != "" {
				return true, d.Err("batch_bucket given twice")
			}
			if !d.AllArgs(&p.BatchBucket) {
				return true, d.ArgErr()
			}
			if !strings.Contains(p.BatchBucket, "{") {
				if _, _, err := vertex.ParseGCSURI(p.BatchBucket); err != nil {
					return true, d.Errf("batch_bucket: %v", err)
				}
			}
			return true, nil
		case "batch_storage_url":
			if p.BatchStorageURL != "" {
				return true, d.Err("batch_storage_url given twice")
			}
			if !d.AllArgs(&p.BatchStorageURL) {
				return true, d.ArgErr()
			}
			if !strings.Contains(p.BatchStorageURL, "{") {
				if _, err := caddygateway.ParseBaseURL("batch_storage_url", p.BatchStorageURL); err != nil {
					return true, d.Err(err.Error())
				}
			}
			return true, nil
		}
		dst := map[string]*string{
			"project": &p.Project, "location": &p.Location, "credentials_file": &p.CredentialsFile,
			"credentials": &p.Credentials, "quota_project": &p.QuotaProject,
		}[d.Val()]
		if dst == nil {
			return false, nil
		}
		if *dst != "" {
			return true, d.Errf("%s given twice", d.Val())
		}
		if !d.AllArgs(dst) {
			return true, d.ArgErr()
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	switch {
	case p.CredentialsFile != "" && p.Credentials != "":
		return d.Err("provider type vertex takes credentials_file or credentials, not both")
	case p.APIKey != "" && (p.CredentialsFile != "" || p.Credentials != ""):
		return d.Err("provider type vertex takes api_key (express mode) or credentials, not both")
	case p.APIKey != "" && p.QuotaProject != "":
		return d.Err("quota_project applies to credentials, not to api_key")
	case p.APIKey != "" && p.BatchBucket != "":
		return d.Err("batch_bucket needs credentials: express mode (api_key) has no batch prediction")
	case p.BatchBucket == "" && p.BatchStorageURL != "":
		return d.Err("provider type vertex takes batch_storage_url only with batch_bucket")
	case p.BatchBucket == "" && p.Batch == batch.ModeNative:
		return d.Err("provider type vertex needs batch_bucket for batch native")
	}
	return nil
}

// Base returns the provider's common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints returns the translators: Vertex AI serves chat and
// embeddings, and the Messages API natively for Claude.
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: p.chat, Embeddings: gemini.Embeddings{Chat: p.chat.Google},
		Messages: vertex.Messages{Claude: p.chat.Claude}}
}

// Interface guards
var (
	_ caddy.Provisioner          = (*Provider)(nil)
	_ caddyfile.Unmarshaler      = (*Provider)(nil)
	_ caddygateway.Provider      = (*Provider)(nil)
	_ caddygateway.NativeBatcher = (*Provider)(nil)
	_ caddygateway.Authenticator = googleAuth{}
	_ oauth2.TokenSource         = copySource{}
)

// BatchMode is where batches send the provider's lines: with
// batch_bucket, its Batch option, else the type's default (native: its
// API has batches); without, the gateway, since batch prediction has
// nowhere to read its records from.
func (p *Provider) BatchMode() string {
	if p.BatchBucket == "" {
		return batch.ModeGateway
	}
	return caddygateway.BatchMode(p.Batch, providerType.Name)
}
