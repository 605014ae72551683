package secretsync

import (
	"strconv"
	"testing"
)

// BenchmarkDesiredContent: building an Opaque Secret of 10 keys from the
// provider's files, the common path every sync takes (the TLS split's
// choice, keymount.io/tls-split and templated keys, is made once per sync
// and only for kubernetes.io/tls).
func BenchmarkDesiredContent(b *testing.B) {
	var pairs, kv []string
	for i := range 10 {
		n := strconv.Itoa(i)
		pairs = append(pairs, "file-"+n, "key-"+n)
		kv = append(kv, "file-"+n, "value of a secret "+n)
	}
	ss, fs := spec("Opaque", pairs...), files(kv...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := desiredContent(ss, fs); err != nil {
			b.Fatal(err)
		}
	}
}
