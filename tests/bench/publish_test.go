package bench_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"testing"

	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/harness"
)

// objectSize is the size of every object: a typical certificate or config.
const objectSize = 4 << 10

const benchClass = "bench"

func TestMain(m *testing.M) {
	// The driver logs every first publish and unpublish; thousands of lines
	// would bury the results.
	harness.DiscardLogs()
	os.Exit(m.Run())
}

// BenchmarkNodePublishVolume measures NodePublishVolume through the CSI
// socket, with the local provider serving objects of 4 KiB:
//
//   - first: publish a new volume (new pod, kubelet's volume ID and target
//     path): mount the tmpfs, bind it onto the target, call the provider,
//     write the files, save the record. Unpublishing it afterwards is not
//     timed.
//   - republish: kubelet's periodic republish of a published volume whose
//     content did not change, a refresh on every republish;
//   - republish-not-due: the same republish when the refresh policy says
//     it is not due (rotation off, upstream's default): no provider call,
//     the target checked, nothing written or reported.
//
// The driver and the provider run in this process, so ns/op is the whole
// round trip kubelet sees, and allocs/op and B/op count everything
// allocated in this process for one call: the CSI client, the driver, the
// provider client and the local provider together. The kernel's side (mounts,
// tmpfs pages) is in ns/op only.
func BenchmarkNodePublishVolume(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			b.Run("first", func(b *testing.B) { benchFirst(b, n) })
			b.Run("republish", func(b *testing.B) { benchRepublish(b, n, harness.Options{}) })
			b.Run("republish-not-due", func(b *testing.B) { benchRepublish(b, n, harness.Options{Refresh: &rotation.Decider{}}) })
		})
	}
}

func benchFirst(b *testing.B, objects int) {
	h := startNode(b, objects)
	ctx := b.Context()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		v := h.NewVolume("secrets")
		req := h.PublishRequest(v.ID, v.Target, benchClass, true)
		b.StartTimer()

		if _, err := h.Node.NodePublishVolume(ctx, req); err != nil {
			b.Fatalf("NodePublishVolume: %v", err)
		}

		b.StopTimer()
		if err := h.Unpublish(ctx, v); err != nil {
			b.Fatalf("NodeUnpublishVolume: %v", err)
		}
		b.StartTimer()
	}
}

func benchRepublish(b *testing.B, objects int, opts harness.Options) {
	h := startNodeWith(b, objects, opts)
	ctx := b.Context()
	v := h.NewVolume("secrets")
	req := h.PublishRequest(v.ID, v.Target, benchClass, true)
	if _, err := h.Node.NodePublishVolume(ctx, req); err != nil {
		b.Fatalf("NodePublishVolume: %v", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := h.Node.NodePublishVolume(ctx, req); err != nil {
			b.Fatalf("NodePublishVolume: %v", err)
		}
	}
	b.StopTimer()
	rec, err := h.Record(v.ID)
	if err != nil || rec == nil || rec.Generation != 1 || rec.LastError != "" {
		b.Fatalf("after %d unchanged republishes: record %+v, %v; want generation 1, no error", b.N, rec, err)
	}
	if err := h.Unpublish(ctx, v); err != nil {
		b.Fatalf("NodeUnpublishVolume: %v", err)
	}
}

// startNode starts a node whose class benchClass mounts objects objects of
// objectSize random bytes each.
func startNode(b *testing.B, objects int) *harness.Harness {
	b.Helper()
	return startNodeWith(b, objects, harness.Options{})
}

func startNodeWith(b *testing.B, objects int, opts harness.Options) *harness.Harness {
	b.Helper()
	h := harness.Start(b, opts)
	names := make([]string, objects)
	for i := range names {
		names[i] = fmt.Sprintf("object-%02d", i)
		h.WriteObject(names[i], string(randomBytes(objectSize)))
	}
	h.WriteClass(benchClass, harness.ObjectsYAML(names...))
	return h
}

func randomBytes(n int) []byte {
	p := make([]byte, n)
	_, _ = rand.Read(p) // crypto/rand.Read never fails.
	return p
}
