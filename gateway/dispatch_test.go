package gateway

import (
	"bytes"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/modelgate/modelgate/providers"
)

// TestAskUsage checks that a streamed request is asked for its usage in
// the bytes sjson.SetBytes writes, which the dispatcher used before.
func TestAskUsage(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"a } b"}]`
	for _, body := range []string{
		`{"model":"m","stream":true,` + msgs + `}`,
		`{"model":"m","stream":true,` + msgs + ` }`,
		"{\"model\":\"m\",\"stream\":true," + msgs + "}\n",
		" \t{ \"model\" : \"m\" , \"stream\" : true , " + msgs + " \n} \r\n",
		`{"model":"m","stream":true,"stream_options":null,` + msgs + `}`,
		`{"model":"m","stream":true,"stream_options":{},` + msgs + `}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":false},` + msgs + `}`,
		`{"model":"m","stream":true,` + msgs + `,"stream_options":{"include_obfuscation":false}}`,
		`{"model":"m","stream":true,` + msgs + `,"x":{"stream_options":{}}}`,
		`{"model":"m","stre\u0061m_options":null,"stream":true,` + msgs + `}`,
	} {
		if _, err := providers.ValidateChat([]byte(body)); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want, err := sjson.SetBytes([]byte(body), "stream_options.include_usage", true)
		if err != nil {
			t.Fatal(err)
		}
		orig := []byte(body)
		if got := askUsage(orig); !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %s\nwant %s", body, got, want)
		}
		if string(orig) != body {
			t.Errorf("%q: the request's body was changed", body)
		}
	}
}

// FuzzAskUsage holds askUsage to sjson.SetBytes on any body ValidateChat
// accepts.
func FuzzAskUsage(f *testing.F) {
	f.Add([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(` {"model":"m","stream_options":{"a":1},"messages":[{"role":"user","content":"}"}]} `))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := providers.ValidateChat(body); err != nil {
			return
		}
		want, err := sjson.SetBytes(bytes.Clone(body), "stream_options.include_usage", true)
		if err != nil {
			return
		}
		if got := askUsage(body); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got %s\nwant %s", body, got, want)
		}
	})
}
