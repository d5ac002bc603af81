// Package azureprovider is the Caddy module of the azure_openai provider type,
// modelgate.providers.azure_openai: Azure OpenAI's classic deployment URLs
// (with api-version) or its v1 API, authenticated with an api-key or with
// Microsoft Entra ID tokens.
package azureprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/providers"
	"github.com/modelgate/modelgate/providers/azure"
	"github.com/modelgate/modelgate/providers/openai"
)

func init() {
	caddy.RegisterModule(Provider{})
}

// Provider is Azure OpenAI. base_url is the resource's endpoint
// (https://<resource>.openai.azure.com); there is no default. With
// api_version the classic deployment URLs are used
// (/openai/deployments/{deployment}/chat/completions?api-version=…);
// without it the v1 API (/openai/v1/chat/completions, the deployment as the
// body's model). The key goes in the api-key header; without a key, Entra
// ID provides tokens.
type Provider struct {
	caddygateway.ProviderBase

	// APIVersion is the api-version of the classic deployment URLs, such
	// as 2024-10-21. Empty: the v1 API. Default: empty.
	APIVersion string `json:"api_version,omitempty"`

	// Deployments maps the model names clients use (after the provider's
	// name) to the deployments that serve them; a name not listed is a
	// deployment name itself.
	Deployments map[string]string `json:"deployments,omitempty"`

	// Entra authenticates with Microsoft Entra ID tokens instead of an
	// api-key. Exactly one of api_key and entra is required.
	Entra *Entra `json:"entra,omitempty"`

	// Batch is where batches send this provider's lines: "native", to
	// its own batch API at its batch price, or "gateway", as live
	// requests. Default: native.
	Batch string `json:"batch,omitempty"`

	chat azure.Chat
}

// Entra is how the gateway gets Microsoft Entra ID tokens for Azure OpenAI:
// as a service principal with a client secret, with a workload identity's
// federated token (Kubernetes), or as the machine's managed identity. The
// token is requested for Scope, cached, and replaced before it expires.
type Entra struct {
	// TenantID is the directory (tenant) of the service principal or the
	// workload identity. Placeholders are resolved. Default:
	// {env.AZURE_TENANT_ID}.
	TenantID string `json:"tenant_id,omitempty"`

	// ClientID is the application (client) id; for a managed identity, a
	// user-assigned identity's client id (empty: the system-assigned one).
	// Default: {env.AZURE_CLIENT_ID}.
	ClientID string `json:"client_id,omitempty"`

	// ClientSecret selects the service principal flow. Use a placeholder
	// such as {env.AZURE_CLIENT_SECRET}.
	ClientSecret string `json:"client_secret,omitempty"`

	// FederatedTokenFile selects the workload identity flow: the file
	// holding the federated token (AKS sets AZURE_FEDERATED_TOKEN_FILE),
	// read anew for each token.
	FederatedTokenFile string `json:"federated_token_file,omitempty"`

	// ManagedIdentity selects the machine's managed identity (the instance
	// metadata service).
	ManagedIdentity bool `json:"managed_identity,omitempty"`

	// Authority is the Entra ID authority host. Default:
	// https://login.microsoftonline.com (sovereign clouds differ).
	Authority string `json:"authority,omitempty"`

	// Scope is the token's scope. Default:
	// https://cognitiveservices.azure.com/.default.
	Scope string `json:"scope,omitempty"`

	// IMDSEndpoint is the managed identity token endpoint. Default:
	// http://169.254.169.254/metadata/identity/oauth2/token.
	IMDSEndpoint string `json:"imds_endpoint,omitempty"`
}

const (
	defaultAuthority = "https://login.microsoftonline.com"
	defaultScope     = "https://cognitiveservices.azure.com/.default"
	defaultIMDS      = "http://169.254.169.254/metadata/identity/oauth2/token"
)

var providerType = caddygateway.ProviderType{Name: "azure_openai", KeyHeader: "api-key"}

// CaddyModule returns the Caddy module information.
func (Provider) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "modelgate.providers.azure_openai",
		New: func() caddy.Module { return new(Provider) },
	}
}

// Provision sets up the translator, the credential and the reverse proxy.
func (p *Provider) Provision(ctx caddy.Context) error {
	p.chat = azure.Chat{APIVersion: caddy.NewReplacer().ReplaceKnown(p.APIVersion, ""), Deployments: p.Deployments}
	t := providerType
	switch {
	case p.Entra != nil && p.APIKey != "":
		return errors.New("azure_openai: give api_key or entra, not both")
	case p.Entra != nil:
		src, err := p.Entra.tokenSource(ctx)
		if err != nil {
			return fmt.Errorf("azure_openai entra: %w", err)
		}
		t.Auth = caddygateway.NewTokenAuth(src)
		t.Secrets = []string{caddy.NewReplacer().ReplaceKnown(p.Entra.ClientSecret, "")}
	case p.APIKey == "":
		return errors.New("azure_openai needs api_key or entra")
	default:
		t.KeyRequired = true
	}
	return p.ProvisionBase(ctx, t)
}

// tokenSource builds the source of Entra ID tokens the configuration
// describes.
func (e *Entra) tokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	repl := caddy.NewReplacer()
	get := func(v, env string) string {
		if v == "" {
			v = "{env." + env + "}"
		}
		return repl.ReplaceKnown(v, "")
	}
	authority := strings.TrimSuffix(get(e.Authority, "AZURE_AUTHORITY_HOST"), "/")
	if authority == "" {
		authority = defaultAuthority
	}
	scope := e.Scope
	if scope == "" {
		scope = defaultScope
	}
	tenant, clientID := get(e.TenantID, "AZURE_TENANT_ID"), get(e.ClientID, "AZURE_CLIENT_ID")
	secret := repl.ReplaceKnown(e.ClientSecret, "")
	tokenFile := repl.ReplaceKnown(e.FederatedTokenFile, "")

	modes := 0
	for _, on := range []bool{secret != "", tokenFile != "", e.ManagedIdentity} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return nil, errors.New("choose one of client_secret, federated_token_file and managed_identity")
	}
	// Token requests outlive no single client request: they belong to the
	// config, and end with it.
	bg := context.WithoutCancel(ctx)
	if e.ManagedIdentity {
		endpoint := repl.ReplaceKnown(e.IMDSEndpoint, "")
		if endpoint == "" {
			endpoint = defaultIMDS
		}
		return &imdsSource{ctx: bg, endpoint: endpoint, resource: strings.TrimSuffix(scope, "/.default"), clientID: clientID}, nil
	}
	if tenant == "" || clientID == "" {
		return nil, errors.New("tenant_id and client_id are required (or AZURE_TENANT_ID and AZURE_CLIENT_ID)")
	}
	cc := &clientcredentials.Config{
		ClientID:  clientID,
		TokenURL:  authority + "/" + url.PathEscape(tenant) + "/oauth2/v2.0/token",
		Scopes:    []string{scope},
		AuthStyle: oauth2.AuthStyleInParams,
	}
	if secret != "" {
		cc.ClientSecret = secret
		return cc.TokenSource(bg), nil
	}
	return &assertionSource{ctx: bg, cc: cc, file: tokenFile}, nil
}

// assertionSource gets tokens with a workload identity's federated token
// as the client assertion, reading the file for each token (Kubernetes
// rotates it).
type assertionSource struct {
	ctx  context.Context
	cc   *clientcredentials.Config
	file string
}

func (s *assertionSource) Token() (*oauth2.Token, error) {
	b, err := os.ReadFile(s.file)
	if err != nil {
		return nil, fmt.Errorf("reading the federated token: %w", err)
	}
	cc := *s.cc
	cc.EndpointParams = url.Values{
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {strings.TrimSpace(string(b))},
	}
	return cc.Token(s.ctx)
}

// imdsSource gets a managed identity's tokens from the instance metadata
// service.
type imdsSource struct {
	ctx                          context.Context
	endpoint, resource, clientID string
}

func (s *imdsSource) Token() (*oauth2.Token, error) {
	q := url.Values{"api-version": {"2018-02-01"}, "resource": {s.resource}}
	if s.clientID != "" {
		q.Set("client_id", s.clientID)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("managed identity endpoint: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	var body struct {
		AccessToken string      `json:"access_token"`
		ExpiresOn   json.Number `json:"expires_on"`
		ExpiresIn   json.Number `json:"expires_in"`
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("managed identity endpoint answered %s", res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.AccessToken == "" {
		return nil, errors.New("managed identity endpoint sent no token")
	}
	tok := &oauth2.Token{AccessToken: body.AccessToken, TokenType: "Bearer"}
	if on, err := body.ExpiresOn.Int64(); err == nil && on > 0 {
		tok.Expiry = time.Unix(on, 0)
	} else if in, err := body.ExpiresIn.Int64(); err == nil && in > 0 {
		tok.Expiry = time.Now().Add(time.Duration(in) * time.Second)
	}
	return tok, nil
}

// UnmarshalCaddyfile reads an azure_openai provider block. Syntax:
//
//	provider <name> azure_openai {
//	    base_url    https://<resource>.openai.azure.com
//	    api_key     <secret>
//	    api_version <version>            # classic deployment URLs; omit for the v1 API
//	    deployment  <model> <deployment> # repeatable
//	    models      <model>...
//	    batch       native|gateway
//	    entra {
//	        tenant_id            <id>
//	        client_id            <id>
//	        client_secret        <secret>
//	        federated_token_file <path>
//	        managed_identity
//	        authority            <url>
//	        scope                <scope>
//	        imds_endpoint        <url>
//	    }
//	    proxy { <reverse_proxy subdirectives> }
//	}
func (p *Provider) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	err := p.UnmarshalBlock(d, providerType, func(d *caddyfile.Dispenser) (bool, error) {
		switch d.Val() {
		case "batch":
			return true, caddygateway.ParseBatchMode(d, &p.Batch)
		case "api_version":
			if !d.AllArgs(&p.APIVersion) {
				return true, d.ArgErr()
			}
		case "deployment":
			var model, dep string
			if !d.AllArgs(&model, &dep) {
				return true, d.ArgErr()
			}
			if _, dup := p.Deployments[model]; dup {
				return true, d.Errf("deployment for model %q given twice", model)
			}
			if p.Deployments == nil {
				p.Deployments = map[string]string{}
			}
			p.Deployments[model] = dep
		case "entra":
			if d.NextArg() {
				return true, d.ArgErr()
			}
			p.Entra = new(Entra)
			return true, p.Entra.unmarshal(d)
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if (p.APIKey == "") == (p.Entra == nil) {
		return d.Err("provider type azure_openai needs exactly one of api_key and entra { … }")
	}
	if p.BaseURL == "" {
		return d.Err("provider type azure_openai needs base_url, the resource's endpoint (https://<resource>.openai.azure.com)")
	}
	return nil
}

func (e *Entra) unmarshal(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "managed_identity" {
			if d.NextArg() {
				return d.ArgErr()
			}
			e.ManagedIdentity = true
			continue
		}
		dst := map[string]*string{
			"tenant_id": &e.TenantID, "client_id": &e.ClientID, "client_secret": &e.ClientSecret,
			"federated_token_file": &e.FederatedTokenFile, "authority": &e.Authority, "scope": &e.Scope,
			"imds_endpoint": &e.IMDSEndpoint,
		}[opt]
		if dst == nil {
			return d.Errf("unrecognized entra option %q", opt)
		}
		if !d.AllArgs(dst) {
			return d.ArgErr()
		}
	}
	return nil
}

// Base returns the provider's common configuration.
func (p *Provider) Base() *caddygateway.ProviderBase { return &p.ProviderBase }

// Endpoints returns the translators: Azure OpenAI serves chat and
// embeddings, and the Responses API passes through.
func (p *Provider) Endpoints() caddygateway.Endpoints {
	return caddygateway.Endpoints{Chat: p.chat, Embeddings: azure.Embeddings{Chat: p.chat}, Responses: azure.Native{Chat: p.chat}}
}

// Interface guards
var (
	_ caddy.Provisioner     = (*Provider)(nil)
	_ caddyfile.Unmarshaler = (*Provider)(nil)
	_ caddygateway.Provider = (*Provider)(nil)
	_ oauth2.TokenSource    = (*imdsSource)(nil)
	_ oauth2.TokenSource    = (*assertionSource)(nil)
)

// BatchMode is where batches send the provider's lines: its Batch
// option, else the type's default (native: its API has batches).
func (p *Provider) BatchMode() string { return caddygateway.BatchMode(p.Batch, providerType.Name) }

// NativeBatches returns Azure OpenAI's Batch API on the surface the
// provider uses: the classic one (/openai, with its api-version, which
// must be one with batches: 2024-10-21 or later) or the v1 API
// (/openai/v1). Records name the deployment of each model, and the
// provider's global batch deployments serve them.
func (p *Provider) NativeBatches(send providers.Send) batch.NativeAPI {
	b := openai.Batches{Send: send, Prefix: "/openai/v1", Model: p.chat.Deployment}
	if v := p.chat.APIVersion; v != "" {
		b.Prefix, b.Query = "/openai", url.Values{"api-version": {v}}.Encode()
		b.Endpoint = func(e string) string { return strings.TrimPrefix(e, "/v1") }
	}
	return b
}

var _ caddygateway.NativeBatcher = (*Provider)(nil)
