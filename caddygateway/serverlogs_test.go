package caddygateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"unsafe"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// serverLogger is the address of the logger in srv's field name.
func serverLogger(t *testing.T, srv *caddyhttp.Server, name string) **zap.Logger {
	t.Helper()
	f := reflect.ValueOf(srv).Elem().FieldByName(name)
	if !f.IsValid() {
		t.Fatalf("caddyhttp.Server has no field %s", name)
	}
	return (**zap.Logger)(unsafe.Pointer(f.UnsafeAddr()))
}

// TestRedactServerLogs checks that a server's access and error loggers,
// once redactServerLogs wrapped them, write the key headers of the request
// they log, added as Caddy's server adds it (WithLazy, from a copy of the
// request the handlers never see), as REDACTED; that the rest of the entry
// and the caller's request stay as they were; that log_credentials turns
// it off; and that a second modelgate_auth wraps nothing more. It also
// pins the fields of Caddy's server this relies on.
func TestRedactServerLogs(t *testing.T) {
	var buf bytes.Buffer
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	srv := new(caddyhttp.Server)
	for _, name := range serverLoggers {
		*serverLogger(t, srv, name) = zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel)).Named("http.log." + name)
	}
	for range 2 {
		if err := redactServerLogs(srv); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range serverLoggers {
		c, ok := (*serverLogger(t, srv, name)).Core().(redactingCore)
		if !ok {
			t.Fatalf("%s is not wrapped", name)
		}
		if _, twice := c.Core.(redactingCore); twice {
			t.Errorf("%s is wrapped twice", name)
		}
	}

	for _, tc := range []struct {
		name        string
		header      map[string]string
		credentials bool
		want        map[string]string
	}{
		{"x-api-key", map[string]string{"X-Api-Key": "mgk_secret", "Anthropic-Version": "2023-06-01"}, false,
			map[string]string{"X-Api-Key": "REDACTED", "Anthropic-Version": "2023-06-01"}},
		{"bearer", map[string]string{"Authorization": "Bearer mgk_secret"}, false, map[string]string{"Authorization": "REDACTED"}},
		{"both", map[string]string{"Authorization": "Bearer mgk_secret", "X-Api-Key": "mgk_secret"}, false,
			map[string]string{"Authorization": "REDACTED", "X-Api-Key": "REDACTED"}},
		{"none", map[string]string{"User-Agent": "mgk_secret-looking agent"}, false, map[string]string{"User-Agent": "mgk_secret-looking agent"}},
		{"log_credentials", map[string]string{"X-Api-Key": "mgk_secret", "Authorization": "Bearer mgk_secret"}, true,
			map[string]string{"X-Api-Key": "mgk_secret", "Authorization": "Bearer mgk_secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			before := r.Header.Clone()
			for _, name := range serverLoggers {
				buf.Reset()
				field := zap.Object("request", caddyhttp.LoggableHTTPRequest{Request: r, ShouldLogCredentials: tc.credentials})
				fields := []zapcore.Field{field}
				l := (*serverLogger(t, srv, name)).WithLazy(fields...)
				l.Info("handled request", zap.Int("status", 200))
				line := buf.String()
				for k, v := range tc.want {
					if got := gjson.Get(line, "request.headers."+k+".0").Str; got != v {
						t.Errorf("%s: %s %q, want %q: %s", name, k, got, v, line)
					}
				}
				if gjson.Get(line, "status").Int() != 200 || gjson.Get(line, "request.uri").Str != "/v1/messages" {
					t.Errorf("%s: the entry lost a field: %s", name, line)
				}
				if !reflect.DeepEqual(fields[0], field) {
					t.Errorf("%s: the caller's field changed", name)
				}
			}
			if !reflect.DeepEqual(r.Header, before) {
				t.Errorf("the logged request's headers changed: %v", r.Header)
			}
		})
	}
}
