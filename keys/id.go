package keys

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// idPrefix starts every key ID.
const idPrefix = "key_"

// sortable is the alphabet of IDs: base32 in ASCII order, so IDs sort by
// creation time.
const sortable = "0123456789abcdefghijklmnopqrstuv"

// newID returns "key_" followed by 24 characters: 48 bits of milliseconds
// since the epoch, then 72 random bits. IDs sort by creation time.
func newID(now time.Time) string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(raw[6:15])
	// 120 bits -> 24 characters of 5 bits.
	hi := binary.BigEndian.Uint64(raw[:8])
	lo := binary.BigEndian.Uint64(raw[8:])
	var out [24]byte
	for i := 23; i >= 0; i-- {
		out[i] = sortable[lo>>8&31] // the low 8 bits of raw[8:] are unused
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return idPrefix + string(out[:])
}

// validID reports whether id looks like one newID made, so that an ID from
// a URL never becomes a path outside the keys folder.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok || len(rest) != 24 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(sortable, rest[i]) < 0 {
			return false
		}
	}
	return true
}
