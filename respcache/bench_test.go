package respcache

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/redistest"
)

// chatBody is a chat request of about size bytes: a system prompt, a few
// turns and a tool, its members out of order, as an agent sends them.
func chatBody(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"temperature":0.2,"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}],"model":"gpt-4o","messages":[{"role":"system","content":"You are a careful classifier. Answer with one label."}`)
	for i := 0; b.Len() < size-64; i++ {
		fmt.Fprintf(&b, `,{"content":"Turn %d: the customer writes about an order that has not arrived, and asks for a refund \u2014 \"urgent\".","role":"user"}`, i)
	}
	b.WriteString(`],"stream":true}`)
	return []byte(b.String())
}

// BenchmarkKey is the key of a chat request per size of body; the MB/s
// is the throughput over the body.
func BenchmarkKey(b *testing.B) {
	for _, kib := range []int{1, 16, 256} {
		body := chatBody(kib << 10)
		b.Run(fmt.Sprintf("%dKiB", kib), func(b *testing.B) {
			r := Request{Account: "acme", API: Chat, Model: "openai/gpt-4o", Body: body}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := KeyOf(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMemory is Lookup (a hit) and Store on a Memory of 10,000
// entries, one goroutine and all cores at once.
func BenchmarkMemory(b *testing.B) {
	ctx := context.Background()
	c, err := New(Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	keys := make([]Key, 2*n)
	for i := range keys {
		keys[i] = keyN(i)
	}
	body := []byte(storedChat)
	for i := range n {
		if err := c.Store(ctx, keys[i], Chat, Entry{Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Lookup", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, ok, _ := c.Lookup(ctx, keys[i%n]); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
	b.Run("LookupParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok, err := c.Lookup(ctx, keys[i%n]); err != nil || !ok {
					b.Errorf("a miss: %v", err)
					return
				}
				i++
			}
		})
	})
	// Store into a full memory: every store evicts the least recently used.
	b.Run("Store", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := c.Store(ctx, keys[n+i%n], Chat, Entry{Body: body}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkRedis is Lookup (a hit) and Store of a 2 KiB answer on a
// redis-server on this machine: one round trip each.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{AppendFsync: "everysec"})
	ctx := context.Background()
	c, err := New(Config{TTL: time.Hour}, NewShared(onRedis(b, srv, 1)[0]))
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(strings.Replace(storedChat, "Hello", strings.Repeat("word ", 400), 1))
	if err := c.Store(ctx, keyN(0), Chat, Entry{Body: answer}); err != nil {
		b.Fatal(err)
	}
	b.Run("Lookup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok, err := c.Lookup(ctx, keyN(0)); !ok || err != nil {
				b.Fatal("miss", err)
			}
		}
	})
	keys := make([]Key, 1000)
	for i := range keys {
		keys[i] = keyN(i)
	}
	b.Run("Store", func(b *testing.B) {
		b.ReportAllocs()
		i := 1
		for b.Loop() {
			if err := c.Store(ctx, keys[i%len(keys)], Chat, Entry{Body: answer}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
