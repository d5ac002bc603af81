package guardrails

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config is the guardrails block of the modelgate app: the guards, applied
// in this order.
type Config struct {
	Guards []GuardConfig `json:"guards,omitempty"`
}

// GuardConfig is one guard.
type GuardConfig struct {
	// Name names the guard in errors, metrics and events. Required,
	// unique.
	Name string `json:"name"`

	// Type is pii, regex, webhook or moderation. Required.
	Type string `json:"type"`

	// Apply is where the guard looks: "request", "response", or both.
	// Default: both.
	Apply []string `json:"apply,omitempty"`

	// Models limits the guard to requests for these models: a
	// "<provider>/<model>" or an alias, as the request names it or as it
	// routes; "<provider>/*" is every model of a provider. Default: every
	// model.
	Models []string `json:"models,omitempty"`

	// Keys limits the guard to requests made with these keys, by name.
	// Default: every key.
	Keys []string `json:"keys,omitempty"`

	// Accounts limits the guard to requests of these accounts (owners).
	// Default: every account.
	Accounts []string `json:"accounts,omitempty"`

	// Action is what a match does: mask (pii and regex only), block or
	// log. Default: mask for pii, block for regex and moderation. A
	// webhook's answer says what to do; its action is not set.
	Action string `json:"action,omitempty"`

	// Detect is a pii guard's detectors: email, phone, credit_card, iban,
	// ip_address, us_ssn, secret. Default: all of them.
	Detect []string `json:"detect,omitempty"`

	// Pattern is a regex guard's regular expression (Go's RE2 syntax).
	Pattern string `json:"pattern,omitempty"`

	// MaxSpan is the longest match of a regex guard, in bytes, that a
	// stream is sure to catch: how much text a stream holds back. Default:
	// the pattern's own bound when it has one (no *, + or {n,}), else 128.
	MaxSpan int `json:"max_span,omitempty"`

	// Replacement is what a regex guard's mask puts in place of a match.
	// Default: the guard's name in capitals, in brackets ("[BANNED]").
	Replacement string `json:"replacement,omitempty"`

	// URL is a webhook guard's screening service (http or https).
	URL string `json:"url,omitempty"`

	// Headers are sent with each webhook call (a bearer token, say).
	Headers map[string]string `json:"headers,omitempty"`

	// Timeout bounds a webhook or moderation call. Default: 2s.
	Timeout Duration `json:"timeout,omitempty"`

	// OnError is what a webhook or moderation guard does when it cannot
	// decide (timeout, error status, an answer it cannot read): block
	// (fail closed, the request gets 503) or allow (fail open). Default:
	// block.
	OnError string `json:"on_error,omitempty"`

	// StreamWindow is how much of a streamed answer a webhook or
	// moderation guard screens at a time, in bytes: each window is held
	// back until screened. Default: 1024.
	StreamWindow int `json:"stream_window,omitempty"`

	// Provider is the provider whose moderation endpoint a moderation
	// guard calls. Required for moderation.
	Provider string `json:"provider,omitempty"`

	// Model is the moderation model. Default: the provider's default
	// (OpenAI: omni-moderation-latest).
	Model string `json:"model,omitempty"`

	// Categories limit a moderation guard to these categories (as the
	// provider names them: "harassment", "self-harm/intent", …). Default:
	// any flag.
	Categories []string `json:"categories,omitempty"`
}

// Duration is a time.Duration that reads as JSON from nanoseconds or a
// string such as "1.5s", and writes as nanoseconds (as caddy.Duration).
type Duration time.Duration

// UnmarshalJSON reads a number of nanoseconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("a duration is nanoseconds or a string such as \"1s\": %w", err)
	}
	*d = Duration(n)
	return nil
}

// Defaults.
const (
	defaultTimeout      = 2 * time.Second
	defaultMaxSpan      = 128
	defaultStreamWindow = 1024
	maxMaxSpan          = 64 << 10
)

// Validate checks the configuration as New does, without building it:
// for a config reader that wants its errors early.
func (c *Config) Validate() error {
	_, err := compile(c, Options{Moderator: noModerator{}})
	return err
}

// validate checks g alone.
func (g *GuardConfig) validate() error {
	if g.Name == "" {
		return errors.New("a guard needs a name")
	}
	for _, a := range g.Apply {
		if a != "request" && a != "response" {
			return fmt.Errorf("guard %s: apply %q: want request or response", g.Name, a)
		}
	}
	switch g.OnError {
	case "", "block", "allow":
	default:
		return fmt.Errorf("guard %s: on_error %q: want block or allow", g.Name, g.OnError)
	}
	if g.Timeout < 0 || g.MaxSpan < 0 || g.StreamWindow < 0 {
		return fmt.Errorf("guard %s: timeout, max_span and stream_window cannot be negative", g.Name)
	}
	actions := map[string][]string{
		"pii": {"mask", "block", "log"}, "regex": {"mask", "block", "log"},
		"moderation": {"block", "log"}, "webhook": {},
	}
	allowed, known := actions[g.Type]
	if !known {
		return fmt.Errorf("guard %s: type %q: want pii, regex, webhook or moderation", g.Name, g.Type)
	}
	if g.Action != "" && !contains(allowed, g.Action) {
		if g.Type == "webhook" {
			return fmt.Errorf("guard %s: a webhook's answer says what to do: it takes no action", g.Name)
		}
		return fmt.Errorf("guard %s: action %q: a %s guard takes %s", g.Name, g.Action, g.Type, strings.Join(allowed, ", "))
	}
	if g.Type != "pii" && len(g.Detect) > 0 {
		return fmt.Errorf("guard %s: detect is for pii guards", g.Name)
	}
	if g.Type != "regex" && (g.Pattern != "" || g.MaxSpan != 0 || g.Replacement != "") {
		return fmt.Errorf("guard %s: pattern, max_span and replacement are for regex guards", g.Name)
	}
	if g.Type != "webhook" && (g.URL != "" || len(g.Headers) > 0) {
		return fmt.Errorf("guard %s: url and headers are for webhook guards", g.Name)
	}
	if g.Type != "moderation" && (g.Provider != "" || g.Model != "" || len(g.Categories) > 0) {
		return fmt.Errorf("guard %s: provider, model and categories are for moderation guards", g.Name)
	}
	external := g.Type == "webhook" || g.Type == "moderation"
	if !external && (g.Timeout != 0 || g.OnError != "" || g.StreamWindow != 0) {
		return fmt.Errorf("guard %s: timeout, on_error and stream_window are for webhook and moderation guards", g.Name)
	}
	switch g.Type {
	case "regex":
		if g.Pattern == "" {
			return fmt.Errorf("guard %s: a regex guard needs a pattern", g.Name)
		}
		if _, err := regexp.Compile(g.Pattern); err != nil {
			return fmt.Errorf("guard %s: pattern: %w", g.Name, err)
		}
		if g.MaxSpan > maxMaxSpan {
			return fmt.Errorf("guard %s: max_span is at most %d", g.Name, maxMaxSpan)
		}
	case "webhook":
		u, err := url.Parse(g.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("guard %s: url %q: want an http or https URL", g.Name, g.URL)
		}
	case "moderation":
		if g.Provider == "" {
			return fmt.Errorf("guard %s: a moderation guard needs a provider", g.Name)
		}
	case "pii":
		for _, d := range g.Detect {
			if _, err := ParseKind(d); err != nil {
				return fmt.Errorf("guard %s: %w", g.Name, err)
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
