package quilltest_test

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/modelgate/modelgate/providers/providertest"

	"example.com/modelgate-provider-quill/quill"
	"example.com/modelgate-provider-quill/quilltest"
)

// TestStrict: the fake answers a signed request in Quill's format and
// refuses, in Quill's error shape, what Quill refuses: a field it does
// not know, a turn of another speaker, no turns, a signature of another
// secret or over another body.
func TestStrict(t *testing.T) {
	s := providertest.Start(t, providertest.Options{Keys: map[string]string{"quill": "kid:sec"}})
	// signed is a request with body, signed over signedBody.
	signed := func(body, signedBody, secret string) *http.Request {
		req := providertest.NewRequest(t, http.MethodPost, s.URL+quilltest.Path, body)
		signer := quill.Signer{KeyID: "kid", Secret: []byte(secret)}
		if err := signer.Authenticate(req, []byte(signedBody)); err != nil {
			t.Fatal(err)
		}
		return req
	}
	const ok = `{"model":"quill-1","turns":[{"speaker":"human","say":"hi you"}],"limit":1}`
	res, body := providertest.Do(t, signed(ok, ok, "sec"))
	if res.StatusCode != 200 || gjson.GetBytes(body, "text").Str != "echo:" || gjson.GetBytes(body, "end").Str != "limit" {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	for _, tc := range []struct {
		name, body, signedBody, secret string
		status                         int
	}{
		{"an unknown field", `{"model":"quill-1","turns":[{"speaker":"human","say":"hi"}],"messages":[]}`, "", "sec", 400},
		{"another speaker", `{"model":"quill-1","turns":[{"speaker":"user","say":"hi"}]}`, "", "sec", 400},
		{"no turns", `{"model":"quill-1","turns":[]}`, "", "sec", 400},
		{"another secret", ok, ok, "other", 403},
		{"another body", ok, `{"model":"quill-1"}`, "sec", 403},
	} {
		signedBody := tc.signedBody
		if signedBody == "" {
			signedBody = tc.body
		}
		res, body := providertest.Do(t, signed(tc.body, signedBody, tc.secret))
		if res.StatusCode != tc.status || gjson.GetBytes(body, "error.kind").Str == "" {
			t.Errorf("%s: %d %s, want a %d in Quill's shape", tc.name, res.StatusCode, body, tc.status)
		}
	}
}
