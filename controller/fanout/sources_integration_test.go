//go:build integration

package fanout_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

const mark = "example.com/source"

func keepMarked(m *metav1.PartialObjectMetadata) bool { _, ok := m.Annotations[mark]; return ok }

// createSecrets creates n unrelated Secrets in namespace ns, 16 at a time.
func createSecrets(tb testing.TB, cs kubernetes.Interface, ns string, from, n int) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i)},
					Data: map[string][]byte{"k": []byte("some value of a realistic size, 64 bytes long ........")}}
				if _, err := cs.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := from; i < from+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
}

func storeKeys(inf toolscache.SharedIndexInformer) []string {
	keys := inf.GetStore().ListKeys()
	slices.Sort(keys)
	return keys
}

func waitKeys(t *testing.T, inf toolscache.SharedIndexInformer, want []string) {
	t.Helper()
	err := poll.Wait(t.Context(), 60*time.Second, func(context.Context) (bool, error) {
		return slices.Equal(storeKeys(inf), want), nil
	})
	if err != nil {
		t.Fatalf("source informer holds %v, want %v: %v", storeKeys(inf), want, err)
	}
}

// TestSourceInformer: across more than one list page of unrelated Secrets,
// the store holds the marked ones only; marking, unmarking and deleting
// move objects in and out.
func TestSourceInformer(t *testing.T) {
	// Own control plane: the informer lists every namespace's Secrets and the test asserts on exactly which it holds.
	env := k8senv.Start(t, k8senv.Options{})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	createSecrets(t, cs, "default", 0, fanout.ListPageSize+100)
	for _, n := range []string{"s1", "s2"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{mark: ""}}}
		if _, err := cs.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	md := metadata.NewForConfigOrDie(env.Config)
	inf := fanout.NewSourceInformer(md, corev1.SchemeGroupVersion.WithResource("secrets"), keepMarked)
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if got := storeKeys(inf); !slices.Equal(got, []string{"default/s1", "default/s2"}) {
		t.Fatalf("after the list the store holds %v, want the two sources", got)
	}
	o, _, _ := inf.GetStore().GetByKey("default/s1")
	if m, ok := o.(*metav1.PartialObjectMetadata); !ok || len(m.ManagedFields) != 0 {
		t.Fatalf("stored source %v: want it without managed fields", o)
	}
	// An unrelated Secret gains the mark: in.
	u, err := cs.CoreV1().Secrets("default").Get(ctx, "unrelated-7", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Annotations = map[string]string{mark: "x"}
	if u, err = cs.CoreV1().Secrets("default").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitKeys(t, inf, []string{"default/s1", "default/s2", "default/unrelated-7"})
	// It loses it: out. A source is deleted: out.
	u.Annotations = nil
	if _, err := cs.CoreV1().Secrets("default").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Secrets("default").Delete(ctx, "s2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitKeys(t, inf, []string{"default/s1"})
}

// BenchmarkSourceInformer measures the heap of a source informer (one
// source) after it synced over 10,000 and then 50,000 unrelated Secrets:
// go test -tags integration -run XXX -bench SourceInformer -benchtime 1x.
func BenchmarkSourceInformer(b *testing.B) {
	// Own control plane: a benchmark measures against a control plane loaded by nothing else.
	env := k8senv.Start(b, k8senv.Options{})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	md := metadata.NewForConfigOrDie(env.Config)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "source", Annotations: map[string]string{mark: ""}}}
	if _, err := cs.CoreV1().Secrets("default").Create(b.Context(), s, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	have := 0
	for _, n := range []int{10000, 50000} {
		createSecrets(b, cs, "default", have, n-have)
		have = n
		b.Run(fmt.Sprintf("unrelated=%d", n), func(b *testing.B) {
			for range b.N {
				base := heap()
				ctx, stop := context.WithCancel(b.Context())
				inf := fanout.NewSourceInformer(md, corev1.SchemeGroupVersion.WithResource("secrets"), keepMarked)
				go inf.RunWithContext(ctx)
				toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
				if got := len(inf.GetStore().ListKeys()); got != 1 {
					b.Fatalf("store holds %d objects, want 1", got)
				}
				b.ReportMetric(float64(heap()-base)/(1<<10), "KiB-heap")
				runtime.KeepAlive(inf)
				stop()
			}
		})
	}
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
