package caddymodule

import (
	"net/http"
	"testing"
)

func BenchmarkTmpParallelFull(b *testing.B) {
	body := benchChatBody("oa/gpt-4o-mini", 0, false)
	for _, bc := range []struct {
		name          string
		managed, full bool
	}{
		{"static", false, false},
		{"managed", true, false},
		{"full", true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g := newBenchGateway(b)
			if bc.full {
				withFullFeatures(b, g)
			}
			header := []string{"Authorization", "Bearer " + benchStaticKey}
			if bc.managed {
				header[1] = "Bearer " + g.managedKey
			}
			b.ReportAllocs()
			b.SetParallelism(50)
			cpuBefore, _ := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := &sink{header: make(http.Header)}
					if err := g.serveModelgate(w, g.request(w, "/v1/chat/completions", body, header...)); err != nil || w.status != 200 {
						b.Errorf("status %d, error %v", w.status, err)
						return
					}
				}
			})
			cpuAfter, _ := processCPU()
			b.ReportMetric(float64(cpuAfter-cpuBefore)/float64(b.N), "cpu-ns/op")
		})
	}
}
