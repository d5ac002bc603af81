package keys

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelgate/modelgate/internal/storage"
)

// Limits of a create request.
const (
	maxNameLen = 64  // characters of a name or an owner
	maxModels  = 100 // entries of models
)

// checkText says what is wrong with a name or owner, or "".
func checkText(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if utf8.RuneCountInString(s) > maxNameLen {
		return fmt.Sprintf("must be at most %d characters", maxNameLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}

// validate checks a create request at the time now.
func validate(nk NewKey, now time.Time) error {
	if msg := checkText(nk.Name); msg != "" {
		return &InvalidError{Param: "name", Message: "name " + msg}
	}
	if nk.Owner != "" {
		if msg := checkText(nk.Owner); msg != "" {
			return &InvalidError{Param: "owner", Message: "owner " + msg}
		}
	}
	if nk.CreatedBy != "" {
		if msg := checkText(nk.CreatedBy); msg != "" {
			return &InvalidError{Param: "created_by", Message: "created_by " + msg}
		}
	}
	if len(nk.Models) > maxModels {
		return &InvalidError{Param: "models", Message: fmt.Sprintf("models may list at most %d models", maxModels)}
	}
	for i, model := range nk.Models {
		if model == "" {
			p := fmt.Sprintf("models[%d]", i)
			return &InvalidError{Param: p, Message: p + " must not be empty"}
		}
	}
	if nk.ExpiresAt != nil && *nk.ExpiresAt <= now.Unix() {
		return &InvalidError{Param: "expires_at", Message: "expires_at must be in the future"}
	}
	return ValidatePolicy(Policy{Limits: nk.Limits, Budget: nk.Budget})
}

// Create validates nk, generates a secret, stores the key (its digest, never
// the secret) and adds it to the index at once. It returns the key and the
// secret, which is shown this once. A refused request is an *InvalidError.
func (m *Manager) Create(ctx context.Context, nk NewKey) (Key, string, error) {
	now := m.now()
	if err := validate(nk, now); err != nil {
		return Key{}, "", err
	}
	secret, err := Generate()
	if err != nil {
		return Key{}, "", fmt.Errorf("generating a key: %w", err)
	}
	owner := nk.Owner
	if owner == "" {
		owner = nk.Name
	}
	k := Key{
		ID:        newID(now),
		Name:      nk.Name,
		Owner:     owner,
		CreatedBy: nk.CreatedBy,
		Hint:      Hint(secret),
		Models:    append([]string{}, nk.Models...),
		CreatedAt: now.Unix(),
		ExpiresAt: cloneInt(nk.ExpiresAt),
		Limits:    cloneLimits(nk.Limits),
		Budget:    cloneBudget(nk.Budget),
	}
	digest := Digest(secret)
	// The index record first: a record is never without it.
	if err := m.storeDigest(ctx, k.ID, digest); err != nil {
		return Key{}, "", err
	}
	if err := m.store(ctx, k, digest); err != nil {
		// Left behind, the index record would name a key that is not
		// there, which is harmless: remove it if the storage lets us.
		_ = m.storage.Delete(context.WithoutCancel(ctx), m.digestKey(digest))
		return Key{}, "", err
	}
	m.markIndexed(k.ID, true)
	m.update(change{op: opCreate, entry: &entry{key: k.clone(), digest: digest, use: new(usage)}})
	m.changed(k.ID)
	return k, secret, nil
}

// List reads every key from storage, oldest first (created_at, then id).
func (m *Manager) List(ctx context.Context) ([]Key, error) {
	all, err := m.loadAll(ctx)
	if err != nil {
		return nil, err
	}
	var errs []error
	list := make([]Key, 0, len(all))
	for _, s := range all {
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		list = append(list, m.withUse(s.key))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].CreatedAt != list[j].CreatedAt {
			return list[i].CreatedAt < list[j].CreatedAt
		}
		return list[i].ID < list[j].ID
	})
	return list, nil
}

// Get reads the key id from storage; ErrNotFound if there is none.
func (m *Manager) Get(ctx context.Context, id string) (Key, error) {
	if !validID(id) {
		return Key{}, ErrNotFound
	}
	k, _, err := m.load(ctx, id)
	return m.withUse(k), err
}

// Delete removes the key from storage and from the index at once;
// ErrNotFound if there is no such key.
func (m *Manager) Delete(ctx context.Context, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	err := m.withLock(ctx, id, func() error {
		// Some storages (certmagic's FileStorage) delete a missing key
		// without complaint, so look first: with Load (the record is
		// small), as Exists says false for a storage that cannot be
		// reached too.
		b, err := m.storage.Load(ctx, m.recordKey(id))
		if err != nil {
			if storage.IsNotExist(err) {
				return ErrNotFound
			}
			return fmt.Errorf("deleting key %s: %w", id, err)
		}
		if err := m.storage.Delete(ctx, m.recordKey(id)); err != nil {
			if storage.IsNotExist(err) {
				return ErrNotFound
			}
			return fmt.Errorf("deleting key %s: %w", id, err)
		}
		// The key is gone; an index record left behind (a record that
		// could not be parsed has no digest to find it by, or the
		// storage failed now) names a missing key and is harmless.
		if _, digest, err := parse(id, b); err == nil {
			_ = m.deleteDigest(ctx, id, digest)
		}
		return nil
	})
	m.markIndexed(id, false)
	if err == nil || errors.Is(err, ErrNotFound) {
		// Gone from storage either way: this instance forgets it too.
		m.update(change{op: opDelete, id: id})
	}
	if err == nil {
		m.changed(id)
	}
	return err
}
