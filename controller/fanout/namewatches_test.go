package fanout

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNameWatchesShareAndStop: objects naming one Secret share one
// watch; it stops with the last of them; a SecretMirror that names another
// source moves to that source's watch.
func TestNameWatchesShareAndStop(t *testing.T) {
	w := NewNameWatches(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), func(types.NamespacedName) client.Object { return nil })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	a, b := types.NamespacedName{Namespace: "p", Name: "a"}, types.NamespacedName{Namespace: "p", Name: "b"}
	src1, src2 := types.NamespacedName{Namespace: "p", Name: "s1"}, types.NamespacedName{Namespace: "p", Name: "s2"}
	for _, m := range []types.NamespacedName{a, b} {
		if err := w.Watch(t.Context(), m, src1); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.count(); n != 1 {
		t.Fatalf("%d watches for one source, want 1", n)
	}
	if err := w.Watch(t.Context(), b, src2); err != nil {
		t.Fatal(err)
	}
	if n := w.count(); n != 2 {
		t.Fatalf("%d watches after b moved to s2, want 2", n)
	}
	w.Forget(a)
	if n := w.count(); n != 1 || w.bySource[src2] == nil {
		t.Fatalf("%d watches after a went, want s2's only", n)
	}
	w.Forget(b)
	w.Forget(b) // twice is no error
	if n := w.count(); n != 0 || len(w.byMirror) != 0 {
		t.Fatalf("%d watches, %d mirrors after both went, want none", n, len(w.byMirror))
	}
}

func (w *NameWatches) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bySource)
}
