package providers

import (
	"testing"
	"time"
)

func TestNow(t *testing.T) {
	fixed := time.Unix(1750000000, 0)
	if got := Now(func() time.Time { return fixed }); !got.Equal(fixed) {
		t.Errorf("Now(fixed) = %v", got)
	}
	before := time.Now()
	if got := Now(nil); got.Before(before) || got.After(time.Now()) {
		t.Errorf("Now(nil) = %v, not the time now", got)
	}
}
