package secretmirror

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// TestSourceWatchesShareAndStop: SecretMirrors naming one source share one
// watch; it stops with the last of them; a SecretMirror that names another
// source moves to that source's watch.
func TestSourceWatchesShareAndStop(t *testing.T) {
	w := newSourceWatches(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()))
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
		if err := w.watch(t.Context(), m, src1); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.count(); n != 1 {
		t.Fatalf("%d watches for one source, want 1", n)
	}
	if err := w.watch(t.Context(), b, src2); err != nil {
		t.Fatal(err)
	}
	if n := w.count(); n != 2 {
		t.Fatalf("%d watches after b moved to s2, want 2", n)
	}
	w.forget(a)
	if n := w.count(); n != 1 || w.bySource[src2] == nil {
		t.Fatalf("%d watches after a went, want s2's only", n)
	}
	w.forget(b)
	w.forget(b) // twice is no error
	if n := w.count(); n != 0 || len(w.byMirror) != 0 {
		t.Fatalf("%d watches, %d mirrors after both went, want none", n, len(w.byMirror))
	}
}

func (w *sourceWatches) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bySource)
}
