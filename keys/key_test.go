package keys

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

func TestKeyJSON(t *testing.T) {
	b, err := json.Marshal(Key{ID: "key_x", Name: "n"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"key_x","name":"n","owner":"","hint":"","models":[],"created_at":0,"last_used_at":null,"expires_at":null,"exposed_at":null}`
	if string(b) != want {
		t.Errorf("Marshal = %s\nwant      %s", b, want)
	}
	b, err = json.Marshal(&Key{Models: []string{"a"}, ExposedAt: ptr(5), Exposure: &Exposure{Reporter: "github"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"models":["a"]`)) || !bytes.Contains(b, []byte(`"exposure":{"reporter":"github","type":"","url":"","source":""}`)) {
		t.Errorf("Marshal = %s", b)
	}
	// A created key without models lists [] too, from Create and from storage.
	m, _ := newManager(nil)
	k, _ := mustCreate(t, m, NewKey{Name: "n"})
	g, err := m.Get(context.Background(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Key{k, g} {
		b, _ := json.Marshal(k)
		if !bytes.Contains(b, []byte(`"models":[]`)) {
			t.Errorf("Marshal = %s", b)
		}
	}
}
