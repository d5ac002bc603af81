package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func init() {
	caddy.RegisterModule(credentialTransport{})
}

// credentialTransport is Caddy's HTTP transport plus the provider's
// credential. It is modelgate-internal: providers configure it for their
// reverse_proxy; users configure the HTTP transport options (in a provider's
// proxy block), never this module directly.
//
// Why a transport: reverse_proxy logs the upstream request's headers at
// debug level and redacts only Authorization, Cookie and their kin, so a key
// sent as x-api-key would land in the log. The transport adds the header to
// a copy of each request as it leaves, below the logging.
type credentialTransport struct {
	*reverseproxy.HTTPTransport

	// CredentialHeader is the header that carries the credential.
	CredentialHeader string `json:"credential_header,omitempty"`

	// Credential is the header's value. It is set in memory when the
	// provider is provisioned and never appears in the user's config.
	Credential string `json:"credential,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (credentialTransport) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.transport.modelgate",
		New: func() caddy.Module { return new(credentialTransport) },
	}
}

// Provision sets up the embedded HTTP transport.
func (t *credentialTransport) Provision(ctx caddy.Context) error {
	if t.HTTPTransport == nil {
		t.HTTPTransport = new(reverseproxy.HTTPTransport)
	}
	return t.HTTPTransport.Provision(ctx)
}

// RoundTrip sends req with the credential header added to a copy of it.
func (t *credentialTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.CredentialHeader != "" {
		r2 := new(http.Request)
		*r2 = *req
		r2.Header = req.Header.Clone()
		r2.Header.Set(t.CredentialHeader, t.Credential)
		req = r2
	}
	return t.HTTPTransport.RoundTrip(req)
}

// Interface guards
var (
	_ caddy.Provisioner                                = (*credentialTransport)(nil)
	_ caddy.CleanerUpper                               = (*credentialTransport)(nil)
	_ http.RoundTripper                                = (*credentialTransport)(nil)
	_ reverseproxy.TLSTransport                        = (*credentialTransport)(nil)
	_ reverseproxy.HealthCheckSchemeOverriderTransport = (*credentialTransport)(nil)
)
