package respcache

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes the cache. The zero value is the defaults.
type Config struct {
	// TTL is how long an answer is served after it was stored. Default:
	// DefaultTTL.
	TTL time.Duration

	// MaxEntries bounds the answers kept in memory on one machine; the
	// least recently used go first. Default: DefaultMaxEntries.
	MaxEntries int

	// MaxBytes bounds the bytes of the answers kept in memory on one
	// machine (bodies and what is kept with them). Default:
	// DefaultMaxBytes.
	MaxBytes int64

	// MaxEntrySize is the largest answer body stored, in memory or on the
	// shared state; a larger one is not stored. Default:
	// DefaultMaxEntrySize.
	MaxEntrySize int64
}

// The defaults of Config.
const (
	DefaultTTL          = time.Hour
	DefaultMaxEntries   = 10_000
	DefaultMaxBytes     = 64 << 20
	DefaultMaxEntrySize = 1 << 20
)

// WithDefaults returns c with the defaults in place of its zero fields.
func (c Config) WithDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxEntrySize == 0 {
		c.MaxEntrySize = DefaultMaxEntrySize
	}
	return c
}

// Validate reports a field out of range: every one must be positive (or
// zero, for its default), and an entry must fit in MaxBytes.
func (c Config) Validate() error {
	var errs []error
	if c.TTL < 0 {
		errs = append(errs, fmt.Errorf("ttl %v is negative", c.TTL))
	}
	if c.TTL > 0 && c.TTL < time.Second {
		errs = append(errs, fmt.Errorf("ttl %v is below a second", c.TTL))
	}
	if c.MaxEntries < 0 {
		errs = append(errs, fmt.Errorf("max_entries %d is negative", c.MaxEntries))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max_size %d is negative", c.MaxBytes))
	}
	if c.MaxEntrySize < 0 {
		errs = append(errs, fmt.Errorf("max_entry_size %d is negative", c.MaxEntrySize))
	}
	if d := c.WithDefaults(); d.MaxEntrySize > d.MaxBytes && c.MaxBytes >= 0 && c.MaxEntrySize >= 0 {
		errs = append(errs, fmt.Errorf("max_entry_size %d is above max_size %d", d.MaxEntrySize, d.MaxBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}
