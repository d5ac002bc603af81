package caddygateway

import (
	"github.com/modelgate/modelgate/batch"
	"github.com/modelgate/modelgate/gateway"
	"github.com/modelgate/modelgate/providers"
)

// NativeBatcher is a provider module whose API has batches of its own
// (docs/design/native-batches.md): the lines a batch routes to it go to
// its batch API, at its batch price, while its batch option is native. A
// provider type gains native batches by implementing it; the others' lines
// run in the gateway.
type NativeBatcher interface {
	// BatchMode is where batches send the provider's lines: batch.ModeNative
	// or batch.ModeGateway (its batch option, else its type's default).
	BatchMode() string

	// NativeBatches returns the provider's batch API, which sends every
	// request through send (the provider's upstream, as live requests
	// go). Nil: the provider, as configured, has none.
	NativeBatches(send providers.Send) batch.NativeAPI
}

// provisionNative adds the batch API of provider name to the config's,
// when the provider has one and its batch mode is native.
func (a *App) provisionNative(name string, p Provider) {
	nb, ok := p.(NativeBatcher)
	if !ok || nb.BatchMode() != batch.ModeNative {
		return
	}
	api := nb.NativeBatches(gateway.NativeSend(p.Base().upstream))
	if api == nil {
		return
	}
	if a.native == nil {
		a.native = make(map[string]batch.NativeAPI)
	}
	a.native[name] = api
}

// nativeAPI is the batch engine's Live.Native: the batch API of provider
// in this config, nil when its lines run in the gateway.
func (a *App) nativeAPI(provider string) batch.NativeAPI { return a.native[provider] }
