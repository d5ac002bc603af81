// Package keys is modelgate's managed API keys: their format, how they are
// hashed, and a Manager that keeps them in a key-value storage with an
// in-memory index for the request path.
//
// A key is "mgk_" followed by 30 random base62 characters and 6 base62
// characters of the CRC32 of those 30, so that secret scanners can find keys
// with Pattern and reject look-alikes offline (WellFormed). Only the SHA-256
// of a key (Digest) and a short Hint are ever stored; the secret is shown
// once, when the key is created.
//
// The package imports nothing of Caddy. Storage is any value with the
// methods of certmagic.Storage that the Manager uses; Caddy's storage
// modules satisfy it as they are.
package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"hash/crc32"
)

// Prefix starts every managed key.
const Prefix = "mgk_"

// Length is a managed key's length: Prefix and 36 base62 characters.
const Length = keyLen

// Pattern is the regular expression secret scanners use to find keys.
const Pattern = `mgk_[0-9A-Za-z]{36}`

const (
	// alphabet is base62 in ASCII order.
	alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

	bodyLen     = 30                                  // random characters
	checksumLen = 6                                   // base62 digits of a CRC32
	keyLen      = len(Prefix) + bodyLen + checksumLen // 40
)

// base62 marks the bytes of alphabet.
var base62 = func() (t [256]bool) {
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = true
	}
	return t
}()

// Generate makes a new secret: Prefix, 30 characters drawn uniformly from
// the base62 alphabet with crypto/rand, and the base62 CRC32 of those 30,
// left-padded with '0' to 6 characters.
func Generate() (string, error) {
	var key [keyLen]byte
	copy(key[:], Prefix)
	var buf [64]byte
	defer clear(buf[:])
	for n := 0; n < bodyLen; {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", err
		}
		for _, b := range buf {
			// 248 = 4×62: rejecting 248–255 keeps every character equally likely.
			if b >= 248 {
				continue
			}
			key[len(Prefix)+n] = alphabet[b%62]
			if n++; n == bodyLen {
				break
			}
		}
	}
	sum := checksum(string(key[len(Prefix) : len(Prefix)+bodyLen]))
	for i := keyLen - 1; i >= keyLen-checksumLen; i-- {
		key[i] = alphabet[sum%62]
		sum /= 62
	}
	s := string(key[:])
	clear(key[:])
	return s, nil
}

// WellFormed reports whether s has the form of a managed key: Prefix, 36
// base62 characters, and a checksum that matches. It does not say whether
// the key exists.
func WellFormed(s string) bool {
	if len(s) != keyLen || s[:len(Prefix)] != Prefix {
		return false
	}
	for i := len(Prefix); i < keyLen; i++ {
		if !base62[s[i]] {
			return false
		}
	}
	sum := checksum(s[len(Prefix) : len(Prefix)+bodyLen])
	for i := keyLen - 1; i >= keyLen-checksumLen; i-- {
		if s[i] != alphabet[sum%62] {
			return false
		}
		sum /= 62
	}
	return true
}

// checksum is crc32.ChecksumIEEE of s, computed on the string itself so
// that checking a key allocates nothing.
func checksum(s string) uint32 {
	tab := crc32.IEEETable
	crc := ^uint32(0)
	for i := 0; i < len(s); i++ {
		crc = tab[byte(crc)^s[i]] ^ crc>>8
	}
	return ^crc
}

// Digest is how keys are compared and stored: the SHA-256 of the secret.
func Digest(secret string) [32]byte {
	if len(secret) <= 64 {
		// A key fits on the stack: hashing it allocates nothing.
		var buf [64]byte
		n := copy(buf[:], secret)
		sum := sha256.Sum256(buf[:n])
		clear(buf[:n])
		return sum
	}
	return sha256.Sum256([]byte(secret))
}

// Hint is what lists show of a key: "mgk_..." and its last 4 characters
// (part of the checksum, not of the random body). A string too short to
// spare 4 characters (under 12) shows none of them.
func Hint(secret string) string {
	if len(secret) < 12 {
		return Prefix + "..."
	}
	return Prefix + "..." + secret[len(secret)-4:]
}
