package providers

import "strings"

// ValidObjectPrefix reports whether prefix, the part of a batch_bucket URI
// after its bucket (s3://bucket/prefix, gs://bucket/prefix), is made of
// non-empty segments of the characters both S3 and Cloud Storage call
// safe in an object's name (letters, digits and !-_.*'()), none "." or
// "..". The empty prefix is valid.
func ValidObjectPrefix(prefix string) bool {
	if prefix == "" {
		return true
	}
	for seg := range strings.SplitSeq(prefix, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.IndexFunc(seg, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("!-_.*'()", r))
		}) >= 0 {
			return false
		}
	}
	return true
}
