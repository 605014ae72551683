package bench_test

import (
	"fmt"
	"os"
	"testing"
)

// BenchmarkNodeUnpublishVolume measures NodeUnpublishVolume through the CSI
// socket for a volume of objects objects of 4 KiB: check the record, unmount
// the target through its descriptor (umount(2), no umount(8) process), remove
// the target directory, unmount and remove the tmpfs. Publishing the volume
// first is not timed. Compare with BenchmarkNodePublishVolume/first: an
// unpublish should cost no more than a publish.
func BenchmarkNodeUnpublishVolume(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			h := startNode(b, n)
			ctx := b.Context()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				v := h.NewVolume("secrets")
				req := h.PublishRequest(v.ID, v.Target, benchClass, true)
				if _, err := h.Node.NodePublishVolume(ctx, req); err != nil {
					b.Fatalf("NodePublishVolume: %v", err)
				}
				b.StartTimer()

				if err := h.Unpublish(ctx, v); err != nil {
					b.Fatalf("NodeUnpublishVolume: %v", err)
				}

				b.StopTimer()
				if _, err := os.Stat(v.Target); !os.IsNotExist(err) {
					b.Fatalf("target %s still there after unpublish: %v", v.Target, err)
				}
				b.StartTimer()
			}
		})
	}
}
