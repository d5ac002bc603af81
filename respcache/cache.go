package respcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelgate/modelgate/providers"
)

// Cache is the response cache of a gateway: its configuration over a
// Store. It is safe for concurrent use.
type Cache struct {
	cfg   Config
	store Store
	now   func() time.Time
}

// New returns a cache configured by c (its defaults for zero fields) over
// store; a nil store is a Memory bounded by c.
func New(c Config, store Store) (*Cache, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.WithDefaults()
	if store == nil {
		store = NewMemory(c)
	}
	return &Cache{cfg: c, store: store, now: time.Now}, nil
}

// Config returns the cache's configuration, defaults in place.
func (c *Cache) Config() Config { return c.cfg }

// Lookup returns the entry of key, stored at most the configured ttl ago.
// An error (the shared state unreachable, an entry that cannot be read)
// is for the host's log: the request is then served as a miss.
func (c *Cache) Lookup(ctx context.Context, key Key) (Entry, bool, error) {
	e, ok, err := c.store.Get(ctx, key)
	if err != nil || !ok {
		return Entry{}, false, err
	}
	// A shorter ttl configured since the entry was stored counts too.
	if !c.now().Before(e.Created.Add(c.cfg.TTL)) {
		return Entry{}, false, nil
	}
	return e, true, nil
}

// Errors of Store, for the host's log; neither is the client's concern.
var (
	// ErrTooLarge: the answer's body is above MaxEntrySize.
	ErrTooLarge = errors.New("respcache: the answer is larger than max_entry_size")
	// ErrNotAnswer: the body is not a complete answer of its API (an
	// error, a failed or unfinished Response).
	ErrNotAnswer = errors.New("respcache: the body is not a complete answer")
)

// Store keeps e, the answer to the request of key made to api, for the
// configured ttl, as created now. The host calls it only for an answer
// that reached the client in full (a 2xx, or a stream that ended as its
// API ends a complete answer) of a request whose Policy allows storing;
// Store checks again that the body is an answer of api and not an error,
// and refuses one above MaxEntrySize. It copies nothing: the caller does
// not change e.Body afterwards.
func (c *Cache) Store(ctx context.Context, key Key, api API, e Entry) error {
	if err := api.check(); err != nil {
		return err
	}
	if int64(len(e.Body)) > c.cfg.MaxEntrySize {
		return ErrTooLarge
	}
	if !isAnswer(api, e.Body) {
		return ErrNotAnswer
	}
	e.Created = c.now()
	if err := c.store.Set(ctx, key, e, c.cfg.TTL); err != nil {
		return fmt.Errorf("respcache: storing an answer: %w", err)
	}
	return nil
}

// isAnswer reports whether body is a complete, successful answer of api,
// not streamed: a JSON object with the member that holds the answer
// (choices, data, results, output, content), and no error: no non-null
// "error" (a Response carries "error": null), not "type": "error"
// (Messages), and for a Response the status completed or incomplete (an
// answer cut at max_output_tokens is the answer to that request).
func isAnswer(api API, body []byte) bool {
	want := map[API]string{Chat: "choices", Embeddings: "data", Rerank: "results", Responses: "output", Messages: "content"}[api]
	var found, failed bool
	ok := providers.Members(body, func(k, v []byte) bool {
		switch string(k) {
		case want:
			found = found || len(v) > 0 && (v[0] == '[')
		case "error":
			failed = failed || !bytes.Equal(v, []byte("null"))
		case "type":
			failed = failed || api == Messages && string(v) != `"message"`
		case "status":
			failed = failed || api == Responses && string(v) != `"completed"` && string(v) != `"incomplete"`
		}
		return !failed
	})
	return ok && found && !failed && providers.ValidJSON(body)
}
