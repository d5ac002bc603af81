package jsonw

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// finish finishes w, whose buffer started with prefix bytes, and checks
// that it wrote valid JSON.
func finish(t *testing.T, w *Writer, prefix int) string {
	t.Helper()
	b, err := w.Finish()
	if err != nil {
		t.Fatalf("Finish: %v (wrote %s)", err, b)
	}
	if !json.Valid(b[prefix:]) {
		t.Fatalf("invalid JSON: %s", b)
	}
	return string(b)
}

func TestWriter(t *testing.T) {
	w := New(nil)
	o := w.Object()
	o.Str("id", "chatcmpl-1")
	o.Int("created", 1750000000)
	o.Null("param")
	o.StrOrNull("code", "")
	o.StrOrNull("type", "x")
	o.Bool("ok", true)
	o.Float("t", 0.25)
	o.Raw("raw", `{"a":[1,2]}`)
	o.Compact("compact", "{ \"a b\" : [ 1 , 2 ] }")
	o.Text("lit", Lit(`"caf\u00e9"`))
	o.Text("plain", Plain("a\"b"))
	o.Text("of", StrOf(gjson.Parse(`7`)))
	o.Concat("id2", "chatcmpl-", "x\n")
	o.Key("k\"ey").Str("v")
	o.KeyText(Lit(`"\u0041"`)).Int(1)
	a := o.Array("choices")
	c := a.Object()
	c.Int("index", 0)
	d := c.Object("delta")
	d.End()
	c.End()
	a.Int(1)
	a.Str("s")
	a.Null()
	a.Bool(false)
	a.Float32(0.1)
	a.Raw("[]")
	a.Compact(" [ ] ")
	a.Text(Plain(""))
	a.Array().End()
	a.End()
	o.End()
	want := `{"id":"chatcmpl-1","created":1750000000,"param":null,"code":null,"type":"x","ok":true,"t":0.25,` +
		`"raw":{"a":[1,2]},"compact":{"a b":[1,2]},"lit":"caf\u00e9","plain":"a\"b","of":"","id2":"chatcmpl-x\n",` +
		`"k\"ey":"v","\u0041":1,"choices":[{"index":0,"delta":{}},1,"s",null,false,0.1,[],[],"",[]]}`
	if got := finish(t, &w, 0); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestWriterScalarsAtTop(t *testing.T) {
	for _, tc := range []struct {
		write func(v Value)
		want  string
	}{
		{func(v Value) { v.Str("a") }, `"a"`},
		{func(v Value) { v.Int(-3) }, `-3`},
		{func(v Value) { v.Null() }, `null`},
		{func(v Value) { v.Bool(true) }, `true`},
		{func(v Value) { v.Float(1e21) }, `1e+21`},
		{func(v Value) { v.Raw(`[1]`) }, `[1]`},
		{func(v Value) { v.Concat("a", "b") }, `"ab"`},
		{func(v Value) { v.Base64([]byte{0xfb, 0xff}) }, `"+/8="`},
		{func(v Value) { v.Base64Text([]byte("QUJD")) }, `"QUJD"`},
		{func(v Value) { v.Encoded("mg1.", base64.RawURLEncoding, []byte{0xfb, 0xff}) }, `"mg1.-_8"`},
	} {
		w := New([]byte("data: "))
		tc.write(w.Value())
		if got := finish(t, &w, len("data: ")); got != "data: "+tc.want {
			t.Errorf("got %s, want data: %s", got, tc.want)
		}
	}
}

func TestWriterMembers(t *testing.T) {
	w := New([]byte("x"))
	o := w.Object()
	o.Str("id", "x")
	o.Int("created", 1)
	o.End()
	head, err := w.Members()
	if err != nil {
		t.Fatal(err)
	}
	w = New(nil)
	o = w.Object()
	o.Members(head)
	o.Int("n", 2)
	o.End()
	if got := finish(t, &w, 0); got != `{"id":"x","created":1,"n":2}` {
		t.Errorf("got %s", got)
	}

	w = New(nil)
	w.Object().End()
	empty, err := w.Members()
	if err != nil || empty.Len() != 0 {
		t.Fatalf("empty members: %v, %d", err, empty.Len())
	}
	w = New(nil)
	o = w.Object()
	o.Members(empty)
	o.Int("n", 2)
	o.Members(head)
	o.End()
	if got := finish(t, &w, 0); got != `{"n":2,"id":"x","created":1}` {
		t.Errorf("got %s", got)
	}

	w = New(nil)
	w.Object().Array("a")
	if _, err := w.Members(); !errors.Is(err, ErrMisuse) {
		t.Errorf("members with an open array: %v", err)
	}
	w = New(nil)
	w.Array().End()
	if _, err := w.Members(); !errors.Is(err, errNotObject) {
		t.Errorf("members of an array: %v", err)
	}
}

// TestMisuse checks that each misuse is reported by Finish.
func TestMisuse(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w *Writer)
		want  error
	}{
		{"nothing", func(w *Writer) {}, errNothing},
		{"unclosed object", func(w *Writer) { w.Object().Int("a", 1) }, errUnclosed},
		{"unclosed inner array", func(w *Writer) {
			o := w.Object()
			o.Array("a")
			o.End()
		}, errStale},
		{"parent written while a child is open", func(w *Writer) {
			o := w.Object()
			o.Object("inner")
			o.Int("b", 1)
		}, errStale},
		{"closed twice", func(w *Writer) {
			a := w.Array()
			a.End()
			a.End()
		}, errStale},
		{"written after End", func(w *Writer) {
			o := w.Object()
			inner := o.Object("x")
			inner.End()
			inner.Int("late", 1)
			o.End()
		}, errStale},
		{"value without key", func(w *Writer) {
			o := w.Object()
			v := o.Key("a")
			v.Int(1)
			v.Int(2) // the slot was used
			o.End()
		}, errNoKey},
		{"key without value", func(w *Writer) {
			o := w.Object()
			o.Key("a")
			o.End()
		}, errKeyNoValue},
		{"two keys", func(w *Writer) {
			o := w.Object()
			o.Key("a")
			o.Int("b", 1)
			o.End()
		}, errTwoKeys},
		{"two top-level values", func(w *Writer) {
			w.Value().Int(1)
			w.Value().Int(2)
		}, errTwoValues},
		{"NaN", func(w *Writer) { w.Value().Float(math.NaN()) }, errNotFinite},
		{"infinity in an array", func(w *Writer) {
			a := w.Array()
			a.Float(math.Inf(1))
			a.End()
		}, errNotFinite},
		{"a prefix to escape", func(w *Writer) { w.Value().Encoded(`"`, base64.StdEncoding, nil) }, errNotPlain},
		{"members while a key waits", func(w *Writer) {
			o := w.Object()
			o.Key("a")
			o.Members(Members{b: []byte(`"b":1`)})
			o.End()
		}, errStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(nil)
			tc.write(&w)
			_, err := w.Finish()
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrMisuse) {
				t.Errorf("Finish error = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestDeep checks nesting past the 64 levels kept in a word.
func TestDeep(t *testing.T) {
	for _, n := range []int{63, 64, 65, 130, 1100} {
		w := New(nil)
		var arrays []Array
		var objects []Object
		v := w.Value()
		for i := range n {
			if i%2 == 0 {
				a := v.Array()
				arrays = append(arrays, a)
				v = a.Value()
			} else {
				o := v.Object()
				objects = append(objects, o)
				v = o.Key("k")
			}
		}
		v.Int(1)
		for i := n - 1; i >= 0; i-- {
			if i%2 == 0 {
				arrays[len(arrays)-1].End()
				arrays = arrays[:len(arrays)-1]
			} else {
				objects[len(objects)-1].End()
				objects = objects[:len(objects)-1]
			}
		}
		got := finish(t, &w, 0)
		want := ""
		for i := range n {
			if i%2 == 0 {
				want += "["
			} else {
				want += `{"k":`
			}
		}
		want += "1"
		for i := n - 1; i >= 0; i-- {
			if i%2 == 0 {
				want += "]"
			} else {
				want += "}"
			}
		}
		if got != want {
			t.Errorf("depth %d: got %s", n, got)
		}
	}
}

func TestReset(t *testing.T) {
	w := New(nil)
	w.Value().Int(1)
	w.Value().Int(2)
	w.Reset([]byte("x"))
	w.Object().End()
	if got := finish(t, &w, 1); got != "x{}" {
		t.Errorf("got %s", got)
	}
}

// TestNoAllocs checks that writing into a buffer with room allocates
// nothing.
func TestNoAllocs(t *testing.T) {
	buf := make([]byte, 0, 1024)
	hw := New(nil)
	ho := hw.Object()
	ho.Str("id", "chatcmpl-1")
	ho.End()
	head, _ := hw.Members()
	allocs := testing.AllocsPerRun(100, func() {
		w := New(buf[:0])
		o := w.Object()
		o.Members(head)
		a := o.Array("choices")
		c := a.Object()
		c.Int("index", 0)
		d := c.Object("delta")
		d.Text("content", Lit(`"hello"`))
		d.End()
		c.Null("logprobs")
		c.Str("finish_reason", "stop")
		c.End()
		a.End()
		o.Float("f", 0.5)
		o.End()
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per chunk", allocs)
	}
}

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"":             `""`,
		"a\"b\\c":      `"a\"b\\c"`,
		"\n\r\t\x01":   `"\n\r\t\u0001"`,
		"\xff":         `"\ufffd"`,
		"\u2028\u2029": `"\u2028\u2029"`,
		"日本":           `"日本"`,
	} {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestPlain(t *testing.T) {
	for k, want := range map[string]bool{"": true, "content": true, "a b~": true, "a\"": false, `a\`: false, "\x1f": false, "\x7f": false, "é": false} {
		if got := plain(k); got != want {
			t.Errorf("plain(%q) = %v", k, got)
		}
	}
}

// FuzzWriter runs a program of writer calls, a byte each, through
// handles that may be stale, and checks that whenever Finish reports no
// misuse the output is valid JSON, and that a program the fuzzer cannot
// get wrong (each call through the innermost handle, closing what it
// opened) gives no misuse.
func FuzzWriter(f *testing.F) {
	f.Add([]byte{0, 2, 3, 4, 5, 6, 1})
	f.Add([]byte{1, 0, 3, 7, 7, 8})
	f.Add([]byte{0, 9, 2, 12, 6})
	f.Fuzz(func(t *testing.T, prog []byte) {
		w := New(nil)
		type handle struct {
			o     Object
			a     Array
			array bool
		}
		var open []handle
		var slot *Value
		top := w.Value()
		slot = &top
		valueSlot := func() Value {
			if slot != nil {
				v := *slot
				slot = nil
				return v
			}
			if len(open) == 0 {
				return w.Value()
			}
			h := open[len(open)-1]
			if h.array {
				return h.a.Value()
			}
			return h.o.Key("k")
		}
		for i, op := range prog {
			switch op % 13 {
			case 0:
				open = append(open, handle{o: valueSlot().Object()})
			case 1:
				open = append(open, handle{a: valueSlot().Array(), array: true})
			case 2:
				valueSlot().Str(strings.Repeat("\"é\x00", i%3))
			case 3:
				valueSlot().Int(int64(i))
			case 4:
				valueSlot().Null()
			case 5:
				valueSlot().Raw(`{"x":[1,"2"]}`)
			case 6, 7:
				if len(open) > 0 {
					h := open[len(open)-1]
					open = open[:len(open)-1]
					if h.array {
						h.a.End()
					} else {
						h.o.End()
					}
				}
			case 8:
				// Close a handle out of order: a misuse unless it is
				// the innermost.
				if len(open) > 0 {
					h := open[int(op/13)%len(open)]
					if h.array {
						h.a.End()
					} else {
						h.o.End()
					}
				}
			case 9:
				if len(open) > 0 && !open[len(open)-1].array {
					v := open[len(open)-1].o.Key("key\n")
					slot = &v
				}
			case 10:
				valueSlot().Compact(" [ 1 , { } ] ")
			case 11:
				valueSlot().Float(float64(i) / 3)
			case 12:
				valueSlot().Text(Lit(`"x\u0041"`))
			}
		}
		b, err := w.Finish()
		if err == nil && !json.Valid(b) {
			t.Fatalf("no misuse reported, but invalid JSON %q", b)
		}
	})
}

func BenchmarkChunk(b *testing.B) {
	buf := make([]byte, 0, 1024)
	hw := New(nil)
	ho := hw.Object()
	ho.Str("id", "chatcmpl-0123456789")
	ho.Str("object", "chat.completion.chunk")
	ho.Int("created", 1750000000)
	ho.Str("model", "claude-sonnet-4-5")
	ho.End()
	head, _ := hw.Members()
	b.ReportAllocs()
	for b.Loop() {
		w := New(buf[:0])
		o := w.Object()
		o.Members(head)
		a := o.Array("choices")
		c := a.Object()
		c.Int("index", 0)
		d := c.Object("delta")
		d.Text("content", Lit(`"Hello, world"`))
		d.End()
		c.Null("logprobs")
		c.Null("finish_reason")
		c.End()
		a.End()
		o.Null("usage")
		o.End()
		buf, _ = w.Finish()
	}
}

func TestTextPrefixed(t *testing.T) {
	for _, tc := range []struct {
		t    Text
		want string
	}{
		{Plain("a\"b").Prefixed("chatcmpl-"), `"chatcmpl-a\"b"`},
		{Lit(`"a\u0041"`).Prefixed("x-"), `"x-a\u0041"`},
		{Lit(`""`).Prefixed("p"), `"p"`},
		{Plain("").Prefixed("é\n"), `"é\n"`},
		{Plain("b").Prefixed("2").Prefixed("1"), `"12b"`},
	} {
		w := New(nil)
		w.Value().Text(tc.t)
		if got := finish(t, &w, 0); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
		if tc.t.Empty() {
			t.Errorf("%s: Empty", tc.want)
		}
	}
	if !Plain("").Empty() || !Lit(`""`).Empty() || !StrOf(gjson.Result{}).Empty() || Plain("x").Empty() {
		t.Error("Empty is wrong")
	}
}

func TestMarkRewind(t *testing.T) {
	w := New(nil)
	o := w.Object()
	o.Int("a", 1)
	m := o.Mark()
	blocks := o.Array("blocks")
	blocks.Object().End()
	m.Rewind() // the member is taken back
	o.Int("b", 2)
	v := o.Key("content")
	m = v.Mark()
	v.Array().End()
	m.Rewind() // the value is taken back; the key waits again
	v.Str("")
	o.End()
	if got := finish(t, &w, 0); got != `{"a":1,"b":2,"content":""}` {
		t.Errorf("got %s", got)
	}

	w = New(nil)
	a := w.Array()
	inner := a.Object()
	m = inner.Mark()
	inner.End()
	a.End()
	m.Rewind() // inner was closed since the mark
	if _, err := w.Finish(); !errors.Is(err, errStale) {
		t.Errorf("rewinding into a closed container: %v", err)
	}
}

func TestRawMembers(t *testing.T) {
	w := New(nil)
	o := w.Object()
	o.RawMembers(" \n")
	o.Str("type", "object")
	o.RawMembers(`"properties": {}`)
	o.RawMembers("")
	o.End()
	if got := finish(t, &w, 0); got != `{"type":"object","properties": {}}` {
		t.Errorf("got %s", got)
	}
	w = New(nil)
	o = w.Object()
	o.RawMembers(`"a":1`)
	o.CompactMembers(` "c" : [ 1 ] `)
	o.Int("b", 2)
	o.End()
	if got := finish(t, &w, 0); got != `{"a":1,"c":[1],"b":2}` {
		t.Errorf("got %s", got)
	}
}

func TestStreaming(t *testing.T) {
	w := New(nil)
	w.OpenObject()
	w.Key("contents")
	w.OpenArray()
	w.OpenObject()
	w.Key("role")
	w.Str("user")
	w.Key("n")
	w.Int(1)
	w.Key("t")
	w.Text(Lit(`"x"`))
	w.Key("b")
	w.Bool(true)
	w.Key("z")
	w.Null()
	w.Key("raw")
	w.Raw(`[1]`)
	w.Key("next")
	o := w.Next().Object()
	o.End()
	w.CloseObject()
	w.CloseArray()
	w.CloseObject()
	if got := finish(t, &w, 0); got != `{"contents":[{"role":"user","n":1,"t":"x","b":true,"z":null,"raw":[1],"next":{}}]}` {
		t.Errorf("got %s", got)
	}

	for _, tc := range []struct {
		name  string
		write func(w *Writer)
		want  error
	}{
		{"key in an array", func(w *Writer) { w.OpenArray(); w.Key("k"); w.Int(1); w.CloseArray() }, errKeyOutside},
		{"key at the top", func(w *Writer) { w.Key("k") }, errKeyOutside},
		{"value without key", func(w *Writer) { w.OpenObject(); w.Int(1); w.CloseObject() }, errNoKey},
		{"array closed as an object", func(w *Writer) { w.OpenArray(); w.CloseObject() }, errWrongClose},
		{"object closed as an array", func(w *Writer) { w.OpenObject(); w.CloseArray() }, errWrongClose},
		{"closed at the top", func(w *Writer) { w.Int(1); w.CloseArray() }, errStale},
	} {
		w := New(nil)
		tc.write(&w)
		if _, err := w.Finish(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestList(t *testing.T) {
	var l List
	for i := range 3 {
		w := l.Begin()
		o := w.Object()
		o.Int("i", int64(i))
		o.End()
		if err := l.End(&w); err != nil {
			t.Fatal(err)
		}
	}
	w := l.Begin()
	w.Object() // left open: not kept
	if err := l.End(&w); !errors.Is(err, ErrMisuse) || l.Len() != 3 {
		t.Fatalf("a misused element: %v, %d elements", err, l.Len())
	}
	var m List
	m.Extend(&l)
	m.Extend(&List{})
	mw := m.Begin()
	mw.Value().Str("x")
	_ = m.End(&mw)

	out := New(nil)
	a := out.Array()
	a.Int(0)
	a.List(&l)
	a.List(&List{})
	a.List(&m)
	a.End()
	if got := finish(t, &out, 0); got != `[0,{"i":0},{"i":1},{"i":2},{"i":0},{"i":1},{"i":2},"x"]` {
		t.Errorf("got %s", got)
	}
	l.Reset()
	out = New(nil)
	a = out.Array()
	a.List(&l)
	a.End()
	if got := finish(t, &out, 0); got != `[]` {
		t.Errorf("after Reset: %s", got)
	}
}

func TestListGrow(t *testing.T) {
	var l List
	l.Grow(64)
	allocs := testing.AllocsPerRun(1, func() {
		l.Reset()
		w := l.Begin()
		w.Value().Str("0123456789012345678901234567890123456789")
		_ = l.End(&w)
	})
	if allocs != 0 || l.Len() != 1 {
		t.Errorf("%v allocations, %d elements", allocs, l.Len())
	}
}

// TestPlainWords checks the eight-bytes-at-a-time plain against the byte
// at a time one for every byte at every place of keys of several lengths.
func TestPlainWords(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 16, 17, 24} {
		base := []byte(strings.Repeat("aZ~ !#09", 4)[:n])
		for i := range n {
			for c := range 256 {
				k := append([]byte(nil), base...)
				k[i] = byte(c)
				if got, want := plain(string(k)), plainBytes(string(k)); got != want {
					t.Fatalf("plain(%q) = %v, want %v", k, got, want)
				}
			}
		}
	}
}
