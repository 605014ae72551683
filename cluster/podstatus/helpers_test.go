package podstatus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube/kubetest"
)

const (
	testNode  = "node-1"
	testNS    = "team-a"
	testPod   = "web-0"
	testUID   = "0b6f3c1e-2f6d-4c39-9a57-2f1d4c3e8a10"
	testClass = "db-creds"
	testPath  = "/var/lib/kubelet/pods/" + testUID + "/volumes/kubernetes.io~csi/secrets/mount"
)

// t0 is a whole second; outcomes add sub-second parts to prove truncation.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := secretsstorev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// writes counts the write requests that reached the fake API.
type writes struct {
	mu                            sync.Mutex
	create, update, patch, delete int
}

func (w *writes) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.create + w.update + w.patch
}

func (w *writes) count(n *int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*n++
}

// fixture is a Writer over a fake API that counts writes. Faults, when set,
// run before the write is passed on and may fail it.
type fixture struct {
	w      *podstatus.Writer
	c      client.Client
	clk    *clocktesting.FakePassiveClock
	writes *writes

	mu         sync.Mutex
	failUpdate int   // how many of the next Updates fail
	updateErr  error // with this error
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	f := &fixture{writes: &writes{}, clk: clocktesting.NewFakePassiveClock(t0)}
	f.c = fake.NewClientBuilder().
		WithScheme(newScheme(t)).
		WithObjects(objs...).
		WithInterceptorFuncs(f.interceptor()).
		Build()
	f.w = podstatus.New(kubetest.Client(f.c), kubetest.Reader(f.c), testNode, f.clk)
	return f
}

func (f *fixture) interceptor() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			f.writes.count(&f.writes.create)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			f.writes.count(&f.writes.update)
			if err := f.updateFault(); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			f.writes.count(&f.writes.patch)
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			f.writes.count(&f.writes.delete)
			return c.Delete(ctx, obj, opts...)
		},
	}
}

// failUpdates makes the next n Updates answer err without writing.
func (f *fixture) failUpdates(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failUpdate, f.updateErr = n, err
}

func (f *fixture) updateFault() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUpdate == 0 {
		return nil
	}
	f.failUpdate--
	return f.updateErr
}

// publish runs Publish and fails the test on an error.
func (f *fixture) publish(t *testing.T, o *driver.Outcome, synced *metav1.Condition) {
	t.Helper()
	if err := f.w.Publish(t.Context(), o, synced); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// publishCounting runs Publish and fails the test unless it made exactly
// want write requests.
func (f *fixture) publishCounting(t *testing.T, o *driver.Outcome, synced *metav1.Condition, want int) {
	t.Helper()
	before := f.writes.total()
	f.publish(t, o, synced)
	if got := f.writes.total() - before; got != want {
		t.Fatalf("Publish made %d write requests, want %d", got, want)
	}
}

// get returns the stored pod status of the test pod and class.
func (f *fixture) get(t *testing.T) *secretsstorev1.SecretProviderClassPodStatus {
	t.Helper()
	return getStatus(t, f.c, testClass)
}

func getStatus(t *testing.T, c client.Reader, class string) *secretsstorev1.SecretProviderClassPodStatus {
	t.Helper()
	st := &secretsstorev1.SecretProviderClassPodStatus{}
	key := client.ObjectKey{Namespace: testNS, Name: podstatus.Name(testPod, testNS, class)}
	if err := c.Get(t.Context(), key, st); err != nil {
		t.Fatalf("get pod status %s: %v", key, err)
	}
	return st
}

func testSPC(generation int64) *secretsstorev1.SecretProviderClass {
	return &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{
		Namespace: testNS, Name: testClass, Generation: generation,
	}}
}

// outcome is a successful first publish of two objects, refreshed at
// refreshed (plus a sub-second part the API would drop).
func outcome(refreshed time.Time) *driver.Outcome {
	return &driver.Outcome{
		VolumeID: "csi-0123", TargetPath: testPath,
		PodName: testPod, PodNamespace: testNS, PodUID: testUID,
		ClassName: testSPC(3).Name, Class: testSPC(3),
		// Deliberately out of order: the status sorts them.
		Objects: []volume.Object{
			{ID: "secretsmanager/db", Version: "v7"},
			{ID: "secretsmanager/api", Version: "v2"},
		},
		First: true, Changed: true,
		LastRefresh: refreshed.Add(123 * time.Millisecond),
	}
}

// republish is o as the next republish reports it when nothing changed.
func republish(o *driver.Outcome, refreshed time.Time) *driver.Outcome {
	n := *o
	n.Class = o.Class.DeepCopy()
	n.Objects = append([]volume.Object(nil), o.Objects...)
	n.First, n.Changed = false, false
	n.LastRefresh = refreshed.Add(456 * time.Millisecond)
	return &n
}

func condition(t *testing.T, st *secretsstorev1.SecretProviderClassPodStatus, typ string) metav1.Condition {
	t.Helper()
	for _, c := range st.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("pod status has no %s condition: %+v", typ, st.Status.Conditions)
	return metav1.Condition{}
}

func hasCondition(st *secretsstorev1.SecretProviderClassPodStatus, typ string) bool {
	for _, c := range st.Status.Conditions {
		if c.Type == typ {
			return true
		}
	}
	return false
}
