// Package ids makes the IDs of modelgate's stored objects (batches, files,
// managed keys): a prefix, then 24 characters that sort by creation time
// and are safe as a storage path element.
//
// It is internal: the batch and keys engines share it.
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"strings"
	"time"
)

// Alphabet is the alphabet of an ID after its prefix: base32 in ASCII
// order, so IDs sort by creation time.
const Alphabet = "0123456789abcdefghijklmnopqrstuv"

// Len is the length of an ID after its prefix.
const Len = 24

// New returns prefix followed by Len characters: 48 bits of milliseconds
// since the epoch, then 72 random bits. IDs made a millisecond or more
// apart sort by creation time.
func New(prefix string, now time.Time) string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(raw[6:15])
	// 120 bits -> 24 characters of 5 bits.
	hi := binary.BigEndian.Uint64(raw[:8])
	lo := binary.BigEndian.Uint64(raw[8:])
	var out [Len]byte
	for i := Len - 1; i >= 0; i-- {
		out[i] = Alphabet[lo>>8&31] // the low 8 bits of raw[8:] are unused
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + string(out[:])
}

// Valid reports whether id looks like one New made with prefix, so that an
// ID from a URL never becomes a path outside its folder.
func Valid(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != Len {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(Alphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}

// Time returns when New made id (to the millisecond), for an id Valid
// with prefix; false for any other.
func Time(id, prefix string) (time.Time, bool) {
	if !Valid(id, prefix) {
		return time.Time{}, false
	}
	rest := id[len(prefix):]
	// The first 10 characters are 50 bits: the 48 of the time, then 2
	// random ones.
	var v uint64
	for i := range 10 {
		v = v<<5 | uint64(strings.IndexByte(Alphabet, rest[i]))
	}
	return time.UnixMilli(int64(v >> 2)), true
}
