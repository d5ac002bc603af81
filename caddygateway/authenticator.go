package caddygateway

import (
	"golang.org/x/oauth2"

	"github.com/modelgate/modelgate/caddygateway/upstream"
)

// The authentication of the gateway to a provider, part of the provider
// contract, is applied by the provider's transport (package upstream):
// these names are its, given here for provider modules.
type (
	// Authenticator authenticates the gateway to a provider: see
	// upstream.Authenticator.
	Authenticator = upstream.Authenticator

	// AuthenticatorFunc adapts a function to the Authenticator interface.
	AuthenticatorFunc = upstream.AuthenticatorFunc

	// HeaderAuth sends a static credential in one header.
	HeaderAuth = upstream.HeaderAuth

	// TokenAuth sends a short-lived OAuth 2 access token.
	TokenAuth = upstream.TokenAuth
)

// TokenEarlyExpiry is how long before its expiry a token is replaced.
const TokenEarlyExpiry = upstream.TokenEarlyExpiry

// NewTokenAuth returns a TokenAuth that takes tokens from src and fetches a
// new one TokenEarlyExpiry before the current one expires.
func NewTokenAuth(src oauth2.TokenSource) TokenAuth { return upstream.NewTokenAuth(src) }
