package providerclient_test

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/keymount/keymount/internal/metrics"
	"github.com/keymount/keymount/provider/providerclient"
)

// BenchmarkProviderLabel is what bounding the provider label adds to a
// publish or a sync (one Label per call): the provider client's Found, a
// lookup among the names whose sockets it found, behind the label table's
// atomic pointer. A first publish takes about a millisecond
// (BenchmarkNodePublishVolume).
func BenchmarkProviderLabel(b *testing.B) {
	dir := b.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "local.sock"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	c, err := providerclient.New(providerclient.Config{Dirs: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	if _, err := c.SocketPath("local"); err != nil {
		b.Fatal(err)
	}
	var p metrics.ProviderLabels
	p.SetFound(c.Found)
	for _, tc := range []struct{ name, want string }{{"local", "local"}, {"made-up", metrics.UnknownProvider}} {
		b.Run("provider="+tc.name, func(b *testing.B) {
			for b.Loop() {
				if got := p.Label(tc.name); got != tc.want {
					b.Fatalf("Label(%q) = %q, want %q", tc.name, got, tc.want)
				}
			}
		})
	}
}
