package keys

import (
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/modelgate/internal/storage"
)

// Storage is the subset of certmagic.Storage the Manager uses. Load returns
// an error wrapping fs.ErrNotExist for a missing key. Lock blocks until the
// lock is held or ctx ends; a lock is held across processes that share the
// storage. (It is the batch engine's Storage too.)
type Storage = storage.Storage

// Manager keeps managed keys in a Storage and an in-memory index of them
// that Lookup reads on every request. Several Managers, in one process or
// many, may share a storage; each sees the others' creates and deletes at
// its next Refresh (or Reload of that key), and FindByDigest sees them at
// once, through the digest index in storage.
type Manager struct {
	// Now is the clock; it defaults to time.Now. Tests set it.
	Now func() time.Time

	// Changed, when set, is told the id of every key this Manager creates,
	// deletes or marks exposed, once the change is in storage: the gateway
	// tells the other instances sharing the storage, which Reload that
	// key at once rather than at their next Refresh.
	Changed func(id string)

	storage Storage
	prefix  string // the storage prefix, without slashes at its ends
	dir     string // <prefix>/keys

	idx atomic.Pointer[index]

	mu        sync.Mutex // held while the index is replaced; guards the fields below
	recording bool       // a Refresh is reading storage: note changes
	changes   []change

	refreshing sync.Mutex // one Refresh at a time

	digestsMu      sync.Mutex
	digestsIndexed map[string]bool // ids whose digest index record this Manager wrote or saw
}

// NewManager keeps keys under <prefix>/keys/ in s (prefix is "modelgate" in
// production). It starts with an empty index: call Refresh to load it.
func NewManager(s Storage, prefix string) *Manager {
	prefix = strings.Trim(prefix, "/")
	m := &Manager{Now: time.Now, storage: s, prefix: prefix, dir: path.Join(prefix, "keys")}
	m.idx.Store(newIndex(0))
	return m
}

// changed tells Changed, if set, of a change to the key id.
func (m *Manager) changed(id string) {
	if m.Changed != nil {
		m.Changed(id)
	}
}

func (m *Manager) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}
