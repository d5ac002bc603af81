package caddygateway

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/modelgate/modelgate/guardrails"
)

// unmarshalGuardrails reads a guardrails block; several blocks add their
// guards, in order. Syntax:
//
//	guardrails {
//	    guard <name> {
//	        type        pii|regex|webhook|moderation
//	        apply       request|response...     # default: both
//	        models      <model>...               # "<provider>/<model>", an alias, "<provider>/*"
//	        keys        <key name>...
//	        accounts    <account>...
//	        action      mask|block|log           # pii: mask; regex, moderation: block
//	        detect      <detector>...            # pii: email phone credit_card iban ip_address us_ssn secret
//	        pattern     <regexp>                 # regex
//	        max_span    <size>                   # regex: default its bound, else 128B
//	        replacement <text>                   # regex: default [<NAME>]
//	        url         <url>                    # webhook
//	        header      <field> <value>          # webhook, repeatable
//	        timeout     <duration>               # webhook, moderation: default 2s
//	        on_error    block|allow              # webhook, moderation: default block
//	        stream_window <size>                 # webhook, moderation: default 1KiB
//	        provider    <name>                   # moderation
//	        model       <model>                  # moderation
//	        categories  <category>...            # moderation
//	    }
//	}
//
// The guards are checked as the engine checks them, so that a mistake is
// an adapt error.
func (a *App) unmarshalGuardrails(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if a.Guardrails == nil {
		a.Guardrails = new(guardrails.Config)
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "guard" {
			return d.Errf("unrecognized guardrails option %q (want guard)", d.Val())
		}
		var g guardrails.GuardConfig
		if !d.Args(&g.Name) || d.NextArg() {
			return d.ArgErr()
		}
		if err := unmarshalGuard(d, &g); err != nil {
			return err
		}
		a.Guardrails.Guards = append(a.Guardrails.Guards, g)
		if err := a.Guardrails.Validate(); err != nil {
			return d.Errf("guardrails: %v", err)
		}
	}
	return nil
}

// unmarshalGuard reads the block of one guard.
func unmarshalGuard(d *caddyfile.Dispenser, g *guardrails.GuardConfig) error {
	one := func(dst *string) error {
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
		return nil
	}
	many := func(dst *[]string) error {
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		*dst = append(*dst, args...)
		return nil
	}
	size := func(dst *int) error {
		var s string
		if err := one(&s); err != nil {
			return err
		}
		n, err := humanize.ParseBytes(s)
		if err != nil || n > 1<<30 {
			return d.Errf("guard %s: %s %q: want a size such as 128 or 1KiB", g.Name, d.Val(), s)
		}
		*dst = int(n)
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "type":
			err = one(&g.Type)
		case "apply":
			err = many(&g.Apply)
		case "models":
			err = many(&g.Models)
		case "keys":
			err = many(&g.Keys)
		case "accounts":
			err = many(&g.Accounts)
		case "action":
			err = one(&g.Action)
		case "detect":
			err = many(&g.Detect)
		case "pattern":
			err = one(&g.Pattern)
		case "max_span":
			err = size(&g.MaxSpan)
		case "replacement":
			err = one(&g.Replacement)
		case "url":
			err = one(&g.URL)
		case "header":
			var k, v string
			if !d.Args(&k, &v) || d.NextArg() {
				return d.ArgErr()
			}
			if g.Headers == nil {
				g.Headers = make(map[string]string)
			}
			g.Headers[k] = v
		case "timeout":
			var s string
			if err = one(&s); err == nil {
				dur, perr := caddy.ParseDuration(s)
				if perr != nil || dur <= 0 {
					return d.Errf("guard %s: timeout %q: want a duration such as 1s", g.Name, s)
				}
				g.Timeout = guardrails.Duration(dur)
			}
		case "on_error":
			err = one(&g.OnError)
		case "stream_window":
			err = size(&g.StreamWindow)
		case "provider":
			err = one(&g.Provider)
		case "model":
			err = one(&g.Model)
		case "categories":
			err = many(&g.Categories)
		default:
			return d.Errf("guard %s: unrecognized option %q", g.Name, opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
