package secretsync

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
)

// cachedObjects is how many objects BenchmarkCachedForm holds, as
// tests/bench BenchmarkController's cluster does.
const cachedObjects = 10000

// syncedJSON is SecretSync i as the API server sends it after its syncs:
// managedFields of the client and the controller, three conditions, one
// object version, syncHash.
func syncedJSON(tb testing.TB, i int) []byte {
	tb.Helper()
	ss := spec("Opaque", fmt.Sprintf("obj-%02d", i%100), "value")
	ss.Name, ss.Namespace = fmt.Sprintf("sync-%05d", i), "bench"
	ss.UID = types.UID(fmt.Sprintf("0b6f3a52-57b0-4a3b-9f07-%012d", i))
	ss.ResourceVersion, ss.Generation = fmt.Sprint(100000+i), 1
	ss.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC))
	ss.Spec.SecretProviderClassName, ss.Spec.ServiceAccountName = fmt.Sprintf("class-%02d", i%100), "bench-app"
	ss.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "bench.test", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "secret-sync.x-k8s.io/v1alpha1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:secretObject":{".":{},"f:data":{},"f:type":{}},"f:secretProviderClassName":{},"f:serviceAccountName":{}}}`)},
		{Manager: "keymount-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "secret-sync.x-k8s.io/v1alpha1",
			FieldsType: "FieldsV1", Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{".":{},"f:conditions":{},"f:lastSuccessfulSyncTime":{},"f:objects":{},"f:observedGeneration":{},"f:syncHash":{}}}`)},
	}
	objects := []ss1.SecretSyncObject{{ID: fmt.Sprintf("obj-%02d", i%100), Version: "v1"}}
	hash := fmt.Sprintf("%064x", i)
	ss.Status = successStatus(ss.Status, 1, hash, objects, "", true)
	ss.Status = successStatus(ss.Status, 1, hash, objects, "", false)
	b, err := json.Marshal(ss)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// secretJSON is the Secret of SecretSync i as the API server sends it.
func secretJSON(tb testing.TB, i int) []byte {
	tb.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("sync-%05d", i), Namespace: "bench", UID: types.UID(fmt.Sprintf("7c1e0d9a-2b4f-4c8e-a1d3-%012d", i)),
			ResourceVersion: fmt.Sprint(200000 + i), Labels: map[string]string{ss1.LabelSecretSync: ""},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "secret-sync.x-k8s.io/v1alpha1", Kind: "SecretSync",
				Name: fmt.Sprintf("sync-%05d", i), UID: types.UID(fmt.Sprintf("0b6f3a52-57b0-4a3b-9f07-%012d", i)),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"value": []byte(fmt.Sprintf("%01024d", i%100))},
	}
	b, err := json.Marshal(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// heapOf is the heap bytes that hold stays alive for, per object.
func heapOf(b *testing.B, n int, hold func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := hold()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkCachedForm measures the heap that the cache's form of 10,000
// SecretSyncs and 10,000 Secrets and the refresh state of 10,000
// SecretSyncs keep alive, per object, before and after the trimmed forms
// (the objects only: not the informer's store and indexes around them).
// Run it with -benchtime 1x.
func BenchmarkCachedForm(b *testing.B) {
	syncs, secrets := make([][]byte, cachedObjects), make([][]byte, cachedObjects)
	for i := range cachedObjects {
		syncs[i], secrets[i] = syncedJSON(b, i), secretJSON(b, i)
	}
	decodeSync := func(i int) *ss1.SecretSync {
		var ss ss1.SecretSync
		if err := json.Unmarshal(syncs[i], &ss); err != nil {
			b.Fatal(err)
		}
		return &ss
	}
	decodeSecret := func(i int) *corev1.Secret {
		var s corev1.Secret
		if err := json.Unmarshal(secrets[i], &s); err != nil {
			b.Fatal(err)
		}
		return &s
	}
	for range b.N {
		b.ReportMetric(heapOf(b, cachedObjects, func() any {
			out := make([]*ss1.SecretSync, cachedObjects)
			for i := range out {
				ss := decodeSync(i) // the former transform: in place
				ss.ManagedFields = nil
				internSecretSync(ss)
				out[i] = ss
			}
			return out
		}), "B/secretsync-whole")
		b.ReportMetric(heapOf(b, cachedObjects, func() any {
			out := make([]*ss1.SecretSync, cachedObjects)
			for i := range out {
				out[i] = trimSecretSync(decodeSync(i))
			}
			return out
		}), "B/secretsync-trimmed")
		b.ReportMetric(heapOf(b, cachedObjects, func() any {
			out := make([]*corev1.Secret, cachedObjects)
			for i := range out {
				s := decodeSecret(i) // the former transform: own label map
				digestSecret(s)
				internMeta(&s.ObjectMeta)
				out[i] = s
			}
			return out
		}), "B/secret-before")
		b.ReportMetric(heapOf(b, cachedObjects, func() any {
			out := make([]*corev1.Secret, cachedObjects)
			for i := range out {
				o, err := trimSecret(decodeSecret(i))
				if err != nil {
					b.Fatal(err)
				}
				s, ok := o.(*corev1.Secret)
				if !ok {
					b.Fatalf("transform returned %T", o)
				}
				out[i] = s
			}
			return out
		}), "B/secret-trimmed")
		now := time.Now()
		b.ReportMetric(heapOf(b, cachedObjects, func() any {
			m := map[types.UID]refreshState{}
			for i := range cachedObjects {
				m[types.UID(fmt.Sprintf("0b6f3a52-57b0-4a3b-9f07-%012d", i))] = refreshState{lastRefresh: now}
			}
			return m
		}), "B/state-before")
		b.ReportMetric(heapOf(b, cachedObjects, func() any {
			s := newStates()
			for i := range cachedObjects {
				s.put(types.UID(fmt.Sprintf("0b6f3a52-57b0-4a3b-9f07-%012d", i)), refreshState{lastRefresh: now})
			}
			return s
		}), "B/state-after")
	}
}
