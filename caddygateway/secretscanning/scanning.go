package secretscanning

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/mail"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/modelgate/modelgate/accounts"
	"github.com/modelgate/modelgate/caddygateway"
	"github.com/modelgate/modelgate/keys"
	"github.com/modelgate/modelgate/keys/notify"
	keyscan "github.com/modelgate/modelgate/keys/scanning"
	"github.com/modelgate/modelgate/providers"
)

func init() {
	caddy.RegisterModule(SecretScanning{})
}

// SecretScanning receives secret-scanning partner alerts (GitHub's, and
// GitLab's, which use the same protocol): signed lists of tokens found in
// public places. It verifies the ECDSA P-256 / SHA-256 signature over the raw
// body, looks each token up among the managed keys by its digest, marks the
// keys found as exposed, tells their owners by e-mail, emits a key_exposed
// event, optionally revokes them, and answers with GitHub's true/false
// positive labels. Unsigned or badly signed alerts get 400 and change
// nothing.
type SecretScanning struct {
	// Reporters are the alert senders accepted. Default: GitHub, with its
	// public keys fetched from GitHub's key list.
	Reporters []ReporterConfig `json:"reporters,omitempty"`

	// AutoRevoke deletes an exposed key at once. Default: off (the key is
	// marked exposed and its owner told; it keeps working until deleted).
	AutoRevoke bool `json:"auto_revoke,omitempty"`

	// SettingsURL is the key settings page the mail sends owners to.
	SettingsURL string `json:"settings_url,omitempty"`

	// SMTP is the mail server owners are told through. Without it, leaks
	// are logged and emitted as events only.
	SMTP *SMTPConfig `json:"smtp,omitempty"`

	// Notify maps a key owner to the address told about its keys. An
	// owner that is itself an e-mail address needs no entry.
	Notify map[string]string `json:"notify,omitempty"`

	// NotifyDefault is told about keys whose owner has no address.
	NotifyDefault string `json:"notify_default,omitempty"`

	app       *caddygateway.App
	reporters []*keyscan.Reporter
	ctx       caddy.Context
	logger    *zap.Logger
}

// ReporterConfig is one accepted alert sender.
type ReporterConfig struct {
	// Name is "github" or "gitlab": it sets the signature header names.
	Name string `json:"name"`

	// PublicKeys are the sender's verification keys, by key identifier.
	PublicKeys []PublicKeyConfig `json:"public_keys,omitempty"`

	// KeysURL is a key list to fetch and cache ({"public_keys": [...]}).
	// Default for GitHub without public_keys: GitHub's list. "off" never
	// fetches.
	KeysURL string `json:"keys_url,omitempty"`

	// Token is sent as a bearer token to KeysURL (GitHub rate-limits
	// anonymous calls). Usually a placeholder such as {env.GITHUB_TOKEN}.
	Token string `json:"token,omitempty"`
}

// PublicKeyConfig is one verification key: PEM text or a PEM file.
type PublicKeyConfig struct {
	ID   string `json:"id"`
	PEM  string `json:"pem,omitempty"`
	File string `json:"file,omitempty"`
}

// SMTPConfig is the mail server leak notices go through.
type SMTPConfig struct {
	// Address is host:port.
	Address string `json:"address"`
	// From is the sender address.
	From string `json:"from"`
	// Username and Password, when set, authenticate with AUTH PLAIN
	// (only over TLS, or to localhost). Placeholders are resolved.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// TLS is starttls (default: when offered), require_starttls,
	// implicit (SMTPS) or none.
	TLS string `json:"tls,omitempty"`
	// Timeout bounds one delivery. Default: 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (SecretScanning) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.modelgate_secret_scanning",
		New: func() caddy.Module { return new(SecretScanning) },
	}
}

// Provision builds the reporters and finds the app and the events app.
func (h *SecretScanning) Provision(ctx caddy.Context) error {
	h.ctx = ctx
	h.logger = ctx.Logger()
	app, err := caddygateway.ConfiguredApp(ctx)
	if err != nil {
		return fmt.Errorf("modelgate_secret_scanning: %w", err)
	}
	h.app = app
	// Keys the gateway itself finds exposed are told as alerts are.
	app.SetExposureReporter(h)

	cfgs := h.Reporters
	if len(cfgs) == 0 {
		cfgs = []ReporterConfig{{Name: "github"}}
	}
	repl := caddy.NewReplacer()
	seen := make(map[string]bool)
	for _, c := range cfgs {
		if seen[c.Name] {
			return fmt.Errorf("reporter %q is configured twice", c.Name)
		}
		seen[c.Name] = true
		r, err := newReporter(c, repl)
		if err != nil {
			return err
		}
		h.reporters = append(h.reporters, r)
	}
	if h.SMTP != nil {
		h.SMTP.Username = repl.ReplaceKnown(h.SMTP.Username, "")
		h.SMTP.Password = repl.ReplaceKnown(h.SMTP.Password, "")
	}
	return nil
}

// newReporter builds one reporter from its config.
func newReporter(c ReporterConfig, repl *caddy.Replacer) (*keyscan.Reporter, error) {
	var r *keyscan.Reporter
	switch c.Name {
	case "github":
		r = keyscan.GitHub()
	case "gitlab":
		r = keyscan.GitLab()
	default:
		return nil, fmt.Errorf("reporter %q: the reporters are github and gitlab", c.Name)
	}
	r.PublicKeys = make(map[string]*ecdsa.PublicKey, len(c.PublicKeys))
	for _, k := range c.PublicKeys {
		text := []byte(k.PEM)
		if k.File != "" {
			b, err := os.ReadFile(k.File)
			if err != nil {
				return nil, fmt.Errorf("reporter %s: public key %s: %w", c.Name, k.ID, err)
			}
			text = b
		}
		pub, err := keyscan.ParsePublicKey(text)
		if err != nil {
			return nil, fmt.Errorf("reporter %s: public key %s: %w", c.Name, k.ID, err)
		}
		if k.ID == "" {
			return nil, fmt.Errorf("reporter %s: a public key needs its key identifier", c.Name)
		}
		r.PublicKeys[k.ID] = pub
	}
	switch {
	case c.KeysURL == "off":
		r.KeysURL = ""
	case c.KeysURL != "":
		r.KeysURL = c.KeysURL
	case len(c.PublicKeys) > 0:
		r.KeysURL = "" // configured keys only, unless a list is asked for
	}
	if r.KeysURL == "" && len(r.PublicKeys) == 0 {
		return nil, fmt.Errorf("reporter %s: give public_key lines or a keys_url", c.Name)
	}
	r.Token = repl.ReplaceKnown(c.Token, "")
	return r, nil
}

// maxAlertBody bounds an alert's body: GitHub sends up to a thousand
// matches in one request.
const maxAlertBody = 1 << 20

// ServeHTTP handles one alert. It is an endpoint: it never calls next.
func (h *SecretScanning) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	if !caddygateway.AllowMethod(w, r, http.MethodPost) {
		return nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAlertBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			caddygateway.WriteError(w, caddygateway.TooLarge(maxAlertBody))
			return nil
		}
		caddygateway.WriteError(w, caddygateway.BadRequest("", "the alert body could not be read"))
		return nil
	}
	rep := h.reporter(r.Header)
	if rep == nil {
		h.logger.Warn("unsigned secret-scanning alert refused", zap.String("remote_ip", r.RemoteAddr))
		caddygateway.WriteError(w, caddygateway.BadRequest("", "the alert is not signed: it needs a reporter's public key identifier and signature headers"))
		return nil
	}
	if err := rep.Verify(r.Context(), r.Header, body); err != nil {
		h.logger.Warn("secret-scanning alert refused", zap.String("reporter", rep.Name),
			zap.String("remote_ip", r.RemoteAddr), zap.Error(err))
		if errors.Is(err, keyscan.ErrKeysUnavailable) {
			caddygateway.WriteError(w, &providers.Error{Status: http.StatusServiceUnavailable, Type: "server_error",
				Message: "the reporter's public keys could not be fetched; try again later"})
			return nil
		}
		caddygateway.WriteError(w, caddygateway.BadRequest("", "the alert's signature does not verify"))
		return nil
	}
	alerts, err := keyscan.ParseAlerts(body)
	if err != nil {
		caddygateway.WriteError(w, caddygateway.BadRequest("", "the alert is not a list of reported tokens: "+err.Error()))
		return nil //nolint:nilerr // answered: the reporter gets its 400, Caddy has nothing to handle
	}

	labels := make([]keyscan.Label, 0, len(alerts))
	for _, a := range alerts {
		exposed, err := h.handleAlert(r.Context(), rep.Name, a)
		if err != nil {
			// The reporter retries on a failure status; nothing is lost.
			h.logger.Error("handling a secret-scanning alert", zap.String("reporter", rep.Name), zap.Error(err))
			caddygateway.WriteError(w, &providers.Error{Status: http.StatusInternalServerError, Type: "server_error",
				Message: "the alert could not be processed; try again later"})
			return nil
		}
		labels = append(labels, keyscan.NewLabel(a, exposed))
	}
	caddygateway.WriteValue(w, http.StatusOK, labels)
	return nil
}

// reporter returns the configured reporter whose headers r carries.
func (h *SecretScanning) reporter(hdr http.Header) *keyscan.Reporter {
	for _, rep := range h.reporters {
		if rep.Signed(hdr) {
			return rep
		}
	}
	return nil
}

// handleAlert marks the reported key exposed, if the token is one, and
// reports whether it is. A token that is not well formed is a false
// positive without a storage lookup.
func (h *SecretScanning) handleAlert(ctx context.Context, reporter string, a keyscan.Alert) (bool, error) {
	if !keys.WellFormed(a.Token) {
		return false, nil
	}
	return h.app.Exposed(ctx, keys.Digest(a.Token), keys.Exposure{Reporter: reporter, Type: a.Type, URL: a.URL, Source: a.Source}, h)
}

// ReportExposure applies auto_revoke to a newly exposed key and tells its
// owner: for a code host's alert, and for a key the gateway found in a
// request (the app calls it; Provision registered this handler).
func (h *SecretScanning) ReportExposure(ctx context.Context, k keys.Key, e keys.Exposure) (bool, error) {
	revoked := false
	if h.AutoRevoke {
		err := h.app.AccountService().DeleteKey(ctx, accounts.Scanner(e.Reporter), k.ID)
		if err != nil && !errors.Is(err, accounts.ErrNotFound) {
			return false, err
		}
		revoked = true
	}
	h.tell(k, e, revoked)
	return revoked, nil
}

// tell e-mails the key's owner in the background: the reporter waits for
// the answer, a mail server may be slow. A failed delivery is logged.
func (h *SecretScanning) tell(k keys.Key, e keys.Exposure, revoked bool) {
	if h.SMTP == nil {
		return
	}
	to := h.recipients(k.Owner)
	if len(to) == 0 {
		h.logger.Warn("no address to tell the owner of an exposed key", zap.String("key_id", k.ID), zap.String("owner", k.Owner))
		return
	}
	leak := notify.Leak{
		KeyID: k.ID, KeyName: k.Name, KeyHint: k.Hint, Owner: k.Owner,
		Reporter: reporterTitle(e.Reporter), URL: e.URL, Source: e.Source,
		FoundAt: time.Now(), Revoked: revoked, SettingsURL: h.SettingsURL,
	}
	s := &notify.SMTP{Addr: h.SMTP.Address, From: h.SMTP.From, Username: h.SMTP.Username, Password: h.SMTP.Password,
		TLS: h.SMTP.TLS, Timeout: time.Duration(h.SMTP.Timeout)}
	msg := notify.Message(h.SMTP.From, strings.Join(to, ", "), leak, time.Now())
	logger := h.logger
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.Send(ctx, to, msg); err != nil {
			logger.Error("telling the owner of an exposed key failed", zap.String("key_id", k.ID), zap.Error(err))
			return
		}
		logger.Info("owner of an exposed key told", zap.String("key_id", k.ID), zap.Strings("to", to))
	}()
}

// recipients are who is told of an exposed key of owner: its account's
// e-mail and the addresses its owners and admins signed in with, and the
// notify entry of the owner (or the owner itself when it is an address);
// notify_default when none of these gives one.
func (h *SecretScanning) recipients(owner string) []string {
	to := h.app.AccountService().Recipients(owner)
	if a := h.address(owner); a != "" && a != h.NotifyDefault && !slices.Contains(to, a) {
		to = append(to, a)
	}
	if len(to) == 0 && h.NotifyDefault != "" {
		to = append(to, h.NotifyDefault)
	}
	return to
}

// address is where the owner of a key is told: the notify entry, the owner
// itself when it is an address, else notify_default.
func (h *SecretScanning) address(owner string) string {
	if a := h.Notify[owner]; a != "" {
		return a
	}
	if addr, err := mail.ParseAddress(owner); err == nil && addr.Name == "" && strings.Contains(owner, "@") {
		return addr.Address
	}
	return h.NotifyDefault
}

func reporterTitle(name string) string {
	switch name {
	case "github":
		return "GitHub"
	case "gitlab":
		return "GitLab"
	case "modelgate":
		return "modelgate (the key was found in a request to the gateway)"
	}
	return name
}

// Validate checks the notification settings.
func (h *SecretScanning) Validate() error {
	if h.SMTP != nil {
		if h.SMTP.Address == "" || h.SMTP.From == "" {
			return errors.New("smtp: an address and a from address are required")
		}
		if _, err := mail.ParseAddress(h.SMTP.From); err != nil {
			return fmt.Errorf("smtp: from %q is not an e-mail address", h.SMTP.From)
		}
		switch h.SMTP.TLS {
		case "", "starttls", "require_starttls", "implicit", "none":
		default:
			return fmt.Errorf("smtp: tls %q: use starttls, require_starttls, implicit or none", h.SMTP.TLS)
		}
	}
	for owner, a := range h.Notify {
		if _, err := mail.ParseAddress(a); err != nil {
			return fmt.Errorf("notify %s: %q is not an e-mail address", owner, a)
		}
	}
	if h.NotifyDefault != "" {
		if _, err := mail.ParseAddress(h.NotifyDefault); err != nil {
			return fmt.Errorf("notify_default: %q is not an e-mail address", h.NotifyDefault)
		}
	}
	if (len(h.Notify) > 0 || h.NotifyDefault != "") && h.SMTP == nil {
		return errors.New("notify needs an smtp server")
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*SecretScanning)(nil)
	_ caddy.Validator             = (*SecretScanning)(nil)
	_ caddyhttp.MiddlewareHandler = (*SecretScanning)(nil)
)
