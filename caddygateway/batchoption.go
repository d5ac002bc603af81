package caddygateway

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/modelgate/modelgate/batch"
)

// ParseBatchMode reads the argument of a provider type's batch option,
// native or gateway, into dst. The provider types whose API has batches
// call it from their UnmarshalCaddyfile.
func ParseBatchMode(d *caddyfile.Dispenser, dst *string) error {
	var s string
	if !d.AllArgs(&s) {
		return d.ArgErr()
	}
	mode, err := batch.ParseMode(s)
	if err != nil {
		return d.Errf("batch must be %s or %s, not %q", batch.ModeNative, batch.ModeGateway, s)
	}
	*dst = mode
	return nil
}

// BatchMode is where batches send a provider's lines: its batch option,
// else the default of its type (native where the type's API has batches).
func BatchMode(option, typeName string) string {
	if option != "" {
		return option
	}
	return batch.DefaultMode(typeName)
}
