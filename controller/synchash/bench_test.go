package synchash

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// benchContent is a typical synced Secret: n keys of size bytes each.
func benchContent(n, size int) *Content {
	c := baseContent()
	c.Data = make(map[string][]byte, n)
	for i := range n {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(i + j)
		}
		c.Data[fmt.Sprintf("key-%02d", i)] = v
	}
	return c
}

// BenchmarkHash measures one syncHash beside the cost of
// secrets-store-sync-controller v0.0.5's hash of the same content: 100,000
// PBKDF2-HMAC-SHA512 rounds over the JSON of the data, then an HMAC-SHA512.
// Both report µs/op.
func BenchmarkHash(b *testing.B) {
	h := hasher(b, 1)
	for _, shape := range []struct{ n, size int }{{2, 32}, {10, 1024}, {1, 64 << 10}} {
		c := benchContent(shape.n, shape.size)
		b.Run(fmt.Sprintf("keymount-hmac-sha256/%dx%dB", shape.n, shape.size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = h.Sum(c)
			}
			reportMicros(b)
		})
	}
	c := benchContent(2, 32)
	b.Run("sync-controller-pbkdf2-100000/2x32B", func(b *testing.B) {
		for b.Loop() {
			data, err := json.Marshal(c.Data)
			if err != nil {
				b.Fatal(err)
			}
			dk, err := pbkdf2.Key(sha512.New, string(data)+c.SyncUID, []byte(c.SyncUID), 100_000, 32)
			if err != nil {
				b.Fatal(err)
			}
			mac := hmac.New(sha512.New, dk)
			mac.Write(dk)
			_ = mac.Sum(nil)
		}
		reportMicros(b)
	})
}

func reportMicros(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(time.Microsecond), "µs/op")
}
