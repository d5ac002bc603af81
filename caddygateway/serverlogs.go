package caddygateway

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"unsafe"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Keeping keys out of Caddy's access and error logs.
//
// Caddy's server writes the request of each access log entry (and of each
// error log entry, when a handler fails) from a copy it takes before the
// first handler runs: caddyhttp.Server.ServeHTTP clones the request, its
// headers deep-copied, into a caddyhttp.LoggableHTTPRequest and hands it to
// its access and error loggers with zap's WithLazy. Whatever a handler
// later does to the request's headers — forgetKey deletes the key headers
// — the logs show them as they arrived. And caddyhttp.LoggableHTTPHeader
// redacts Authorization, Cookie and their kin, never X-Api-Key: the key the
// Anthropic SDKs and Claude Code send would be written in the clear. Caddy
// has no hook that runs before that copy, and no setting for which headers
// its logs redact; a log filter (format filter { request>headers>X-Api-Key
// … }) is the operator's to write in every site and easy to forget.
//
// So modelgate_auth, when it is provisioned in a server, wraps that
// server's access and error loggers — the zap loggers the server keeps in
// its accessLogger and errorLogger fields, unexported — in redactingCore:
// when the logged request is encoded, which zap does lazily, as the entry is
// written, it is given a copy of the request whose key headers (keyHeaders)
// read REDACTED, as Caddy writes Authorization. Nothing else of the entry
// changes; sites without modelgate_auth in the same server get the same
// treatment (a key sent to the wrong path is still a key). As in Caddy, the
// server's log_credentials option turns the redaction off.
//
// The fields are reached with reflect and unsafe: Caddy offers no other
// way, and is pinned (go.mod, xcaddy.json). Should a Caddy version rename or
// retype them, provisioning fails with an error saying so, rather than
// serve with keys in the logs (TestRedactServerLogs fails first).

// serverLoggers are the fields of caddyhttp.Server that hold the loggers
// its access and error log entries are written with.
var serverLoggers = [...]string{"accessLogger", "errorLogger"}

// redactServerLogs makes srv's access and error logs write the key headers
// as REDACTED. It may run several times on one server (once per
// modelgate_auth handler in it); the loggers are wrapped once.
func redactServerLogs(srv *caddyhttp.Server) error {
	v := reflect.ValueOf(srv).Elem()
	for _, name := range serverLoggers {
		f := v.FieldByName(name)
		if !f.IsValid() || f.Type() != reflect.TypeFor[*zap.Logger]() {
			return fmt.Errorf("keeping keys out of the logs of server %s: this Caddy version's caddyhttp.Server has no field %s of type *zap.Logger (modelgate is built for Caddy v2.11)", srv.Name(), name)
		}
		logger := (**zap.Logger)(unsafe.Pointer(f.UnsafeAddr())) //nolint:gosec // see the comment at the top of the file
		if *logger == nil {
			continue // a server without access logs has no access logger
		}
		if _, done := (*logger).Core().(redactingCore); done {
			continue
		}
		*logger = (*logger).WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return redactingCore{c} }))
	}
	return nil
}

// redactingCore is a logger's core that redacts the key headers of the
// request a log entry's context holds (a caddyhttp.LoggableHTTPRequest
// field, added with With or WithLazy, as Caddy's server adds it). Check
// goes to the wrapped core, which adds its own cores to the entry as it
// would without the wrapper, so the entry goes exactly where it went
// before; their context holds the redacted request.
type redactingCore struct{ zapcore.Core }

// With adds fields to the context, any logged request redacted.
func (c redactingCore) With(fields []zapcore.Field) zapcore.Core {
	return redactingCore{c.Core.With(redactRequests(fields))}
}

// redactRequests returns fields with each logged request that holds a key
// header replaced by its redacted copy; fields itself when there is none
// (it is not modified: it is the caller's).
func redactRequests(fields []zapcore.Field) []zapcore.Field {
	out := fields
	for i, f := range fields {
		lr, ok := f.Interface.(caddyhttp.LoggableHTTPRequest)
		if !ok || f.Type != zapcore.ObjectMarshalerType || lr.Request == nil || lr.ShouldLogCredentials || !holdsKeyHeader(lr.Header) {
			continue
		}
		if &out[0] == &fields[0] {
			out = append([]zapcore.Field(nil), fields...)
		}
		lr.Request = redactKeyHeaders(lr.Request)
		out[i].Interface = lr
	}
	return out
}

// holdsKeyHeader reports whether h has a key header.
func holdsKeyHeader(h http.Header) bool {
	for _, k := range keyHeaders {
		if _, ok := h[k]; ok {
			return true
		}
	}
	return false
}

// redacted is what the logs show of a key header's values, as Caddy shows
// Authorization's.
var redacted = []string{"REDACTED"}

// redactKeyHeaders returns a shallow copy of r (a request to log, as
// LoggableHTTPRequest reads it) whose key headers read REDACTED.
func redactKeyHeaders(r *http.Request) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	r2.Header = maps.Clone(r.Header)
	for _, k := range keyHeaders {
		if _, ok := r2.Header[k]; ok {
			r2.Header[k] = redacted
		}
	}
	return r2
}
