package podstatus_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/kube/kubetest"
)

func record() *volume.Record {
	return &volume.Record{
		VolumeID: "csi-0123", TargetPath: testPath,
		PodName: testPod, PodNamespace: testNS, PodUID: testUID, Class: testClass,
	}
}

func exists(t *testing.T, c client.Reader) bool {
	t.Helper()
	err := c.Get(t.Context(), client.ObjectKey{Namespace: testNS, Name: podstatus.Name(testPod, testNS, testClass)},
		&secretsstorev1.SecretProviderClassPodStatus{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestDeleteIsIdempotent(t *testing.T) {
	f := newFixture(t)
	f.publish(t, outcome(t0), nil)
	for i := range 2 {
		if err := f.w.Delete(t.Context(), record()); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
		if exists(t, f.c) {
			t.Fatalf("pod status still exists after Delete #%d", i+1)
		}
	}
	if f.writes.delete != 1 {
		t.Errorf("%d delete requests, want 1", f.writes.delete)
	}
}

func TestDeleteFindsStatusTheCacheHasNotSeen(t *testing.T) {
	f := newFixture(t)
	f.publish(t, outcome(t0), nil)
	w := podstatus.New(kubetest.Client(f.c), cache(t), testNode, f.clk)
	if err := w.Delete(t.Context(), record()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if exists(t, f.c) {
		t.Error("pod status still exists")
	}
}

func TestDeleteRetriesAfterStaleCache(t *testing.T) {
	f := newFixture(t)
	o := outcome(t0)
	f.publish(t, o, nil)
	stale := cache(t, f.get(t))
	o.Objects = o.Objects[:1]
	f.publish(t, o, nil) // the live object moved on

	w := podstatus.New(kubetest.Client(f.c), stale, testNode, f.clk)
	if err := w.Delete(t.Context(), record()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if exists(t, f.c) {
		t.Error("pod status still exists")
	}
	if f.writes.delete != 2 {
		t.Errorf("%d delete requests, want 2 (stale resourceVersion, then the live one)", f.writes.delete)
	}
}

func TestDeleteKeepsAnotherPodsStatus(t *testing.T) {
	tests := map[string]func(r *volume.Record, w **podstatus.Writer, f *fixture){
		// The pod was recreated with the same name; its volume's status is
		// the new pod's.
		"other pod UID": func(r *volume.Record, _ **podstatus.Writer, _ *fixture) { r.PodUID = "old-pod-uid" },
		// The new pod runs on another node, whose driver relabelled it.
		"other node": func(_ *volume.Record, w **podstatus.Writer, f *fixture) {
			*w = podstatus.New(kubetest.Client(f.c), kubetest.Reader(f.c), "node-2", f.clk)
		},
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.publish(t, outcome(t0), nil)
			rec, w := record(), f.w
			change(rec, &w, f)
			if err := w.Delete(t.Context(), rec); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if !exists(t, f.c) {
				t.Error("another pod's status was deleted")
			}
			if f.writes.delete != 0 {
				t.Errorf("%d delete requests, want 0", f.writes.delete)
			}
		})
	}
}

func TestDeleteWithoutPodUID(t *testing.T) {
	f := newFixture(t)
	f.publish(t, outcome(t0), nil)
	rec := record()
	rec.PodUID = ""
	if err := f.w.Delete(t.Context(), rec); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if exists(t, f.c) {
		t.Error("pod status still exists")
	}
}
