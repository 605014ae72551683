//go:build integration

package convert_test

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	"github.com/keymount/keymount/cmd/keymount/internal/convert"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/motoserver"
	"github.com/keymount/keymount/tests/poll"
)

// cutoverInput is the team's ExternalSecret that the cut-over moves.
const cutoverInput = `apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: sm, namespace: team}
spec:
  provider:
    aws:
      service: SecretsManager
      region: eu-west-1
      auth: {jwt: {serviceAccountRef: {name: app}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: app-db, namespace: team}
spec:
  refreshInterval: 1h
  secretStoreRef: {name: sm, kind: SecretStore}
  data:
  - {secretKey: username, remoteRef: {key: team/db, property: username}}
  - {secretKey: password, remoteRef: {key: team/db, property: password}}
`

// secretWatch records every event of one Secret from a resource version
// on: what a workload reading it would have seen.
type secretWatch struct {
	mu       sync.Mutex
	events   []watch.Event
	stopping bool // what comes after is the watch's own end
	stop     func()
	done     chan struct{}
}

func watchSecret(t *testing.T, cl *cluster, ns, name, from string) *secretWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cl.cs.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: from})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	sw := &secretWatch{done: make(chan struct{})}
	var once sync.Once
	sw.stop = func() {
		once.Do(func() {
			sw.mu.Lock()
			sw.stopping = true
			sw.mu.Unlock()
			w.Stop()
			cancel()
			<-sw.done
		})
	}
	go func() {
		defer close(sw.done)
		for ev := range w.ResultChan() {
			sw.mu.Lock()
			if !sw.stopping {
				sw.events = append(sw.events, ev)
			}
			sw.mu.Unlock()
		}
	}()
	t.Cleanup(func() { sw.stop() })
	return sw
}

// TestLiveCutOverFromExternalSecrets runs the steps of
// docs/migrating-from-external-secrets.md's "Moving a live Secret" on a
// real API server (with the garbage collector) with keymount-controller and
// the AWS provider against moto: ESO's Secret, owned by its ExternalSecret,
// is watched from before the first step to after the rollback. The
// converted SecretSync first refuses it (SecretConflict: the two never
// write one Secret); the ExternalSecret deleted with --cascade=orphan
// leaves it ownerless; annotated with the SecretSync's UID it is adopted
// (one owner, the SecretSync); the SecretSync deleted with --cascade=orphan
// leaves it again for ESO. The watch sees the Secret at every step, never
// deleted, its data never changed.
func TestLiveCutOverFromExternalSecrets(t *testing.T) {
	ctx := t.Context()
	endpoint := motoserver.Start(t)
	values := seedStore(t, endpoint)
	cl, _ := startControllerCluster(t, stsAudience, k8senv.Options{ControllerManager: true, CRDDirectoryPaths: []string{"testdata/eso-crds"}},
		func(env *k8senv.Env, dir string) { serveAWS(t, env, dir, endpoint, region, 0) })
	cl.namespace(t, ns)
	cl.irsaServiceAccount(t, ns, "app")

	// What ESO left: its ExternalSecret, and the Secret it owns.
	es := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": "app-db", "namespace": ns}}}
	if err := cl.c.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	db := values["team/db"]
	data := map[string][]byte{"username": esoValue(t, db, "username"), "password": esoValue(t, db, "password")}
	yes := true
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-db",
		Labels:      map[string]string{"reconcile.external-secrets.io/managed": "true"},
		Annotations: map[string]string{"reconcile.external-secrets.io/data-hash": "0123"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: "app-db",
			UID: es.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Type: corev1.SecretTypeOpaque, Data: data}
	if err := cl.c.Create(ctx, secret, client.FieldOwner("externalsecrets.external-secrets.io/app-db")); err != nil {
		t.Fatal(err)
	}
	sw := watchSecret(t, cl, ns, "app-db", secret.ResourceVersion)
	key := types.NamespacedName{Namespace: ns, Name: "app-db"}

	// 1-2. Convert, apply: the SecretSync refuses the ExternalSecret's Secret.
	createEach(t, cl, convertInput(t, cutoverInput, convert.Options{}))
	ss := waitReady(t, cl, key, metav1.ConditionFalse, ss1.ReasonSecretConflict)
	if msg := meta.FindStatusCondition(ss.Status.Conditions, ss1.ConditionReady).Message; !strings.Contains(msg, "keymount.io/secret-sync-uid="+string(ss.UID)) {
		t.Errorf("the conflict's message %q does not say how to hand the Secret over", msg)
	}

	// 3. kubectl delete externalsecret app-db --cascade=orphan --wait
	if err := cl.c.Delete(ctx, es, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the ExternalSecret gone and its Secret ownerless", func(ctx context.Context) (bool, error) {
		err := cl.c.Get(ctx, client.ObjectKeyFromObject(es), es.DeepCopy())
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		s, err := cl.cs.CoreV1().Secrets(ns).Get(ctx, "app-db", metav1.GetOptions{})
		return err == nil && len(s.OwnerReferences) == 0, err
	})

	// 4. kubectl annotate secret app-db keymount.io/secret-sync-uid=<uid>,
	//    kubectl annotate secretsync app-db keymount.io/refresh=<now>
	annotate(t, cl, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-db"}}, "keymount.io/secret-sync-uid", string(ss.UID))
	annotate(t, cl, &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-db"}}, "keymount.io/refresh", "cutover")

	// 5. kubectl wait secretsync/app-db --for=condition=Ready
	waitReady(t, cl, key, metav1.ConditionTrue, "")
	got, err := cl.cs.CoreV1().Secrets(ns).Get(ctx, "app-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != ss.UID {
		t.Errorf("after the hand-over the Secret's owners are %+v, want the SecretSync alone", got.OwnerReferences)
	}

	// Rollback: kubectl delete secretsync app-db --cascade=orphan --wait
	if err := cl.c.Delete(ctx, &ss1.SecretSync{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-db"}},
		client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the SecretSync gone and the Secret ownerless again", func(ctx context.Context) (bool, error) {
		err := cl.c.Get(ctx, key, &ss1.SecretSync{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		s, err := cl.cs.CoreV1().Secrets(ns).Get(ctx, "app-db", metav1.GetOptions{})
		return err == nil && len(s.OwnerReferences) == 0, err
	})

	sw.stop()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if len(sw.events) == 0 {
		t.Fatal("the watch saw no event: the steps changed nothing it could check")
	}
	for _, ev := range sw.events {
		s, ok := ev.Object.(*corev1.Secret)
		switch {
		case ev.Type == watch.Deleted:
			t.Errorf("the Secret was deleted during the cut-over")
		case ev.Type == watch.Error || !ok:
			t.Errorf("watch event %s %T %+v", ev.Type, ev.Object, ev.Object)
		case !maps.EqualFunc(s.Data, data, func(a, b []byte) bool { return string(a) == string(b) }):
			t.Errorf("the Secret's data changed during the cut-over (%s, resource version %s): keys %v", ev.Type, s.ResourceVersion, keysOf(s.Data))
		}
	}
	t.Logf("the Secret was written %d times during the cut-over, its data never changed", len(sw.events))
}

// waitReady waits for the SecretSync's Ready condition with status and
// reason (any, if "").
func waitReady(t *testing.T, cl *cluster, key types.NamespacedName, status metav1.ConditionStatus, reason string) *ss1.SecretSync {
	t.Helper()
	var ss ss1.SecretSync
	poll.Until(t, "SecretSync "+key.String()+" Ready="+string(status)+" "+reason, func(ctx context.Context) (bool, error) {
		if err := cl.c.Get(ctx, key, &ss); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		c := meta.FindStatusCondition(ss.Status.Conditions, ss1.ConditionReady)
		return c != nil && c.Status == status && (reason == "" || c.Reason == reason), nil
	})
	return &ss
}

// annotate sets one annotation of obj with a merge patch, as kubectl
// annotate does.
func annotate(t *testing.T, cl *cluster, obj client.Object, k, v string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+k+`":"`+v+`"}}}`))
	if err := cl.c.Patch(t.Context(), obj, patch); err != nil {
		t.Fatal(err)
	}
}
