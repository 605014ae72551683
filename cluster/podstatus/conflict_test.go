package podstatus_test

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/kube/kubetest"
)

var podStatusResource = schema.GroupResource{Group: secretsstorev1.GroupName, Resource: "secretproviderclasspodstatuses"}

// cache is a reader holding its own copies of objs: a stand-in for an
// informer cache that lags the API.
func cache(t *testing.T, objs ...client.Object) kube.Reader {
	t.Helper()
	return kubetest.Reader(fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(objs...).Build())
}

func TestPublishRetriesConflict(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)

	f.failUpdates(1, apierrors.NewConflict(podStatusResource, "x", nil))
	changed := republish(first, t0.Add(time.Minute))
	changed.Objects = []volume.Object{{ID: "secretsmanager/db", Version: "v8"}}
	f.publishCounting(t, changed, nil, 2) // the conflict, then the write
	if got := f.get(t).Status.Objects; len(got) != 1 || got[0].Version != "v8" {
		t.Errorf("objects = %+v, want db v8", got)
	}
}

func TestPublishGivesUpOnPersistentConflict(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)

	f.failUpdates(100, apierrors.NewConflict(podStatusResource, "x", nil))
	changed := republish(first, t0.Add(time.Minute))
	changed.Objects = nil
	err := f.w.Publish(t.Context(), changed, nil)
	if !apierrors.IsConflict(err) {
		t.Fatalf("Publish = %v, want a conflict after the retries", err)
	}
	if f.writes.update < 2 || f.writes.update > 10 {
		t.Errorf("%d updates, want a few retries", f.writes.update)
	}
}

// A stale cache makes the first update conflict; the retry reads the live
// object, finds it already says the same, and writes nothing more.
func TestPublishConflictRereadsLiveClient(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)
	old := f.get(t)

	// Another writer (this driver before a restart) already recorded v8.
	changed := republish(first, t0.Add(time.Minute))
	changed.Objects = []volume.Object{{ID: "secretsmanager/db", Version: "v8"}}
	f.publishCounting(t, changed, nil, 1)
	current := f.get(t)

	w := podstatus.New(kubetest.Client(f.c), cache(t, old), testNode, f.clk)
	before := f.writes.total()
	if err := w.Publish(t.Context(), changed, nil); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if n := f.writes.total() - before; n != 1 {
		t.Errorf("%d write requests, want 1 (the conflicting update from the stale cache)", n)
	}
	if got := f.get(t).ResourceVersion; got != current.ResourceVersion {
		t.Errorf("resourceVersion %s → %s, want unchanged", current.ResourceVersion, got)
	}
}

// A cache that has not seen the status yet: the create answers
// AlreadyExists and the retry updates the live object.
func TestPublishCreateAlreadyExists(t *testing.T) {
	f := newFixture(t)
	first := outcome(t0)
	f.publishCounting(t, first, nil, 1)

	w := podstatus.New(kubetest.Client(f.c), cache(t), testNode, f.clk)
	changed := republish(first, t0.Add(time.Minute))
	changed.Objects = []volume.Object{{ID: "secretsmanager/db", Version: "v8"}}
	if err := w.Publish(t.Context(), changed, nil); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if f.writes.create != 2 || f.writes.update != 1 {
		t.Errorf("creates %d, updates %d; want 2 (first publish, then AlreadyExists) and 1", f.writes.create, f.writes.update)
	}
	if got := f.get(t).Status.Objects; len(got) != 1 || got[0].Version != "v8" {
		t.Errorf("objects = %+v, want db v8", got)
	}
}
