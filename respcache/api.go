package respcache

import "fmt"

// API is the API of the unified gateway a request was made to; each keeps
// its answers apart from the others'.
type API string

// The APIs whose answers are cached.
const (
	Chat       API = "chat"       // POST /v1/chat/completions
	Embeddings API = "embeddings" // POST /v1/embeddings
	Rerank     API = "rerank"     // POST /v1/rerank
	Responses  API = "responses"  // POST /v1/responses
	Messages   API = "messages"   // POST /v1/messages
)

// valid reports whether a is one of the APIs above.
func (a API) valid() bool {
	switch a {
	case Chat, Embeddings, Rerank, Responses, Messages:
		return true
	}
	return false
}

func (a API) check() error {
	if !a.valid() {
		return fmt.Errorf("respcache: unknown API %q", string(a))
	}
	return nil
}

// Usage is what the request that produced an answer used, as the host's
// meter counted it: kept with the answer, so that a hit can be recorded
// with the usage it saved.
type Usage struct {
	Prompt       int64 // input tokens, cached and cache-write ones included
	Cached       int64 // of Prompt, read from the provider's prompt cache
	CacheWrite   int64 // of Prompt, written to the provider's prompt cache
	CacheWrite1h int64 // of CacheWrite, written for an hour
	Completion   int64 // output tokens, reasoning included
	Reasoning    int64 // of Completion
	Searches     int64 // rerank searches
	Embedding    int64 // embedding input tokens
}
