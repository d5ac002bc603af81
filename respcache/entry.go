package respcache

import (
	"encoding/binary"
	"errors"
	"time"
)

// Entry is a cached answer.
type Entry struct {
	// Body is the answer as the client's API gives it not streamed: a
	// chat.completion, a Response, a Message, an embeddings list, a rerank
	// result. An Entry a Store returns shares its Body with the store:
	// the caller only reads it.
	Body []byte

	// Usage is what the request that produced the answer used.
	Usage Usage

	// Provider and Model are who answered: the configured provider's name
	// and its name of the model.
	Provider, Model string

	// Created is when the answer was stored.
	Created time.Time
}

// size is what e takes in memory: its bytes and a fixed allowance for the
// entry's structure, its key and the store's bookkeeping.
func (e Entry) size() int64 {
	return int64(len(e.Body)+len(e.Provider)+len(e.Model)) + entryOverhead
}

// entryOverhead is what an entry costs in memory besides its bytes: the
// Entry and the store's node (about 200 bytes), a map slot and its key.
const entryOverhead = 256

// entryVersion starts an encoded entry.
const entryVersion = 1

// errCorrupt is the error of a stored value that is not an entry.
var errCorrupt = errors.New("respcache: a stored entry is corrupt")

// encode appends e to dst as the shared state keeps it: the version, the
// creation time in Unix nanoseconds, the eight usage counts, the provider
// and the model (each its length and bytes), then the body to the end.
func (e *Entry) encode(dst []byte) []byte {
	dst = append(dst, entryVersion)
	dst = binary.AppendVarint(dst, e.Created.UnixNano())
	for _, n := range e.Usage.counts() {
		dst = binary.AppendVarint(dst, n)
	}
	for _, s := range [...]string{e.Provider, e.Model} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return append(dst, e.Body...)
}

// decodeEntry reads an entry encode wrote. The body is a slice of b.
func decodeEntry(b []byte) (Entry, error) {
	var e Entry
	if len(b) == 0 || b[0] != entryVersion {
		return e, errCorrupt
	}
	b = b[1:]
	varint := func() int64 {
		n, k := binary.Varint(b)
		if k <= 0 {
			b = nil
			return 0
		}
		b = b[k:]
		return n
	}
	created := varint()
	var counts [8]int64
	for i := range counts {
		counts[i] = varint()
	}
	strs := [2]string{}
	for i := range strs {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return Entry{}, errCorrupt
		}
		strs[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if b == nil {
		return Entry{}, errCorrupt
	}
	e.Created = time.Unix(0, created)
	e.Usage.setCounts(counts)
	e.Provider, e.Model = strs[0], strs[1]
	e.Body = b
	return e, nil
}

func (u *Usage) counts() [8]int64 {
	return [8]int64{u.Prompt, u.Cached, u.CacheWrite, u.CacheWrite1h, u.Completion, u.Reasoning, u.Searches, u.Embedding}
}

func (u *Usage) setCounts(c [8]int64) {
	u.Prompt, u.Cached, u.CacheWrite, u.CacheWrite1h, u.Completion, u.Reasoning, u.Searches, u.Embedding =
		c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
}
