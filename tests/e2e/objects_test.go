package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

const (
	// managedLabel marks Secrets keymount syncs.
	managedLabel = "secrets-store.csi.k8s.io/managed"
	// classAnnotation names the class that syncs a Secret.
	classAnnotation = "keymount.io/secretproviderclass"
)

// newNamespace creates a namespace named after the node, with the service
// account test pods run as (envtest runs no ServiceAccount controller).
func (n *node) newNamespace(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	ns := n.name
	if _, err := n.s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount}}
	if _, err := n.s.kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account %s/%s: %v", ns, serviceAccount, err)
	}
	return ns
}

// object is one entry of the local provider's objects parameter.
type object struct {
	name, alias, mode string
}

// objectsParameter encodes the local provider's objects parameter.
func objectsParameter(t *testing.T, objs ...object) string {
	t.Helper()
	list := make([]map[string]string, 0, len(objs))
	for _, o := range objs {
		m := map[string]string{"objectName": o.name}
		if o.alias != "" {
			m["objectAlias"] = o.alias
		}
		if o.mode != "" {
			m["filePermission"] = o.mode
		}
		list = append(list, m)
	}
	data, err := yaml.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// createClass creates a SecretProviderClass of provider serving objs and
// syncing secretObjects.
func (n *node) createClass(t *testing.T, namespace, name, provider string, objs []object, secretObjects ...*secretsstorev1.SecretObject) *secretsstorev1.SecretProviderClass {
	t.Helper()
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider:      secretsstorev1.Provider(provider),
			Parameters:    map[string]string{"objects": objectsParameter(t, objs...)},
			SecretObjects: secretObjects,
		},
	}
	if err := n.s.ctrl.Create(t.Context(), spc); err != nil {
		t.Fatalf("create SecretProviderClass %s/%s: %v", namespace, name, err)
	}
	return spc
}

// version is the local provider's version of an object's content.
func version(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:16])
}

// statusName is upstream's name of a pod status: <pod>-<namespace>-<class>.
func statusName(pod *corev1.Pod, class string) string {
	return pod.Name + "-" + pod.Namespace + "-" + class
}

// podStatus reads a pod status live; nil when there is none.
func (s *suite) podStatus(t *testing.T, pod *corev1.Pod, class string) *secretsstorev1.SecretProviderClassPodStatus {
	t.Helper()
	st := &secretsstorev1.SecretProviderClassPodStatus{}
	err := s.ctrl.Get(t.Context(), client.ObjectKey{Namespace: pod.Namespace, Name: statusName(pod, class)}, st)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get pod status %s: %v", statusName(pod, class), err)
	}
	return st
}

// secret reads a Secret live; nil when there is none. Its data (except the
// certificates) joins usedSecrets: no log may hold it.
func (s *suite) secret(t *testing.T, namespace, name string) *corev1.Secret {
	t.Helper()
	sec, err := s.kube.CoreV1().Secrets(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get Secret %s/%s: %v", namespace, name, err)
	}
	for k, v := range sec.Data {
		if k != corev1.TLSCertKey && k != "ca.crt" { // certificates are public
			usedSecrets.add(fmt.Sprintf("key %q of Secret %s/%s", k, namespace, name), string(v))
		}
	}
	return sec
}

// wantStatus is what a test expects of a pod status.
type wantStatus struct {
	volume string
	class  *secretsstorev1.SecretProviderClass
	// objects are the mounted objects' contents by object name.
	objects map[string][]byte
	// synced is the expected SecretsSynced condition status; "" when the
	// condition must be absent.
	synced metav1.ConditionStatus
	// changed asks for ContentChanged=True (a refresh changed the content:
	// keymount-controller's restart report); false leaves it unchecked.
	changed bool
}

// statusView is the part of a pod status the tests compare.
type statusView struct {
	Labels     map[string]string
	Owners     []metav1.OwnerReference
	Status     secretsstorev1.SecretProviderClassPodStatusStatus
	Conditions map[string]metav1.ConditionStatus
}

// checkPodStatus waits until the pod status of a mounted volume is what
// upstream and keymount write for want (the driver writes it after
// answering kubelet), fails the test if it does not get there, and returns
// it.
func (n *node) checkPodStatus(t *testing.T, pod *corev1.Pod, want wantStatus) *secretsstorev1.SecretProviderClassPodStatus {
	t.Helper()
	return n.s.waitForStatus(t, pod, want.class.Name, n.statusIs(pod, want))
}

// statusIs accepts the pod status of a mounted volume that is exactly what
// upstream and keymount write for want.
func (n *node) statusIs(pod *corev1.Pod, want wantStatus) statusCheck {
	wantView := statusView{
		Labels: map[string]string{secretsstorev1.InternalNodeLabel: n.name},
		Owners: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		Status: secretsstorev1.SecretProviderClassPodStatusStatus{
			PodName:                 pod.Name,
			SecretProviderClassName: want.class.Name,
			Mounted:                 true,
			TargetPath:              n.targetPath(pod, want.volume),
			ObservedGeneration:      want.class.Generation,
		},
		Conditions: map[string]metav1.ConditionStatus{
			secretsstorev1.ConditionMounted: metav1.ConditionTrue,
			secretsstorev1.ConditionCurrent: metav1.ConditionTrue,
		},
	}
	for name, content := range want.objects {
		wantView.Status.Objects = append(wantView.Status.Objects, secretsstorev1.SecretProviderClassObject{ID: name, Version: version(content)})
	}
	slices.SortFunc(wantView.Status.Objects, func(a, b secretsstorev1.SecretProviderClassObject) int { return strings.Compare(a.ID, b.ID) })
	if want.synced != "" {
		wantView.Conditions[secretsstorev1.ConditionSecretsSynced] = want.synced
	}
	if want.changed {
		wantView.Conditions[secretsstorev1.ConditionContentChanged] = metav1.ConditionTrue
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(secretsstorev1.SecretProviderClassPodStatusStatus{}, "Conditions", "LastRefreshTime"),
		cmpopts.EquateEmpty(),
	}
	return func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		var errs []error
		got := statusView{Labels: st.Labels, Owners: st.OwnerReferences, Status: st.Status, Conditions: map[string]metav1.ConditionStatus{}}
		for _, c := range st.Status.Conditions {
			if c.Type == secretsstorev1.ConditionContentChanged && !want.changed {
				continue
			}
			got.Conditions[c.Type] = c.Status
			if c.ObservedGeneration != want.class.Generation {
				errs = append(errs, fmt.Errorf("condition %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, want.class.Generation))
			}
		}
		if diff := cmp.Diff(wantView, got, opts); diff != "" {
			errs = append(errs, fmt.Errorf("(-want +got):\n%s", diff))
		}
		if st.Status.LastRefreshTime == nil {
			errs = append(errs, errors.New("no lastRefreshTime"))
		}
		return errors.Join(errs...)
	}
}

// waitForEvent waits for an event about pod with type and reason whose
// message holds every string of contains, and returns it.
func (s *suite) waitForEvent(t *testing.T, pod *corev1.Pod, typ, reason string, contains ...string) *corev1.Event {
	t.Helper()
	var found *corev1.Event
	var seen []string
	poll.Until(t, "a "+typ+" event "+reason+" on pod "+pod.Name, func(ctx context.Context) (bool, error) {
		evs := s.podEvents(t, pod)
		seen = seen[:0]
		for i := range evs {
			e := &evs[i]
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
			if e.Type == typ && e.Reason == reason && containsAll(e.Message, contains) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if found == nil {
		t.Fatalf("no %s event %s on pod %s among %q", typ, reason, pod.Name, seen)
	}
	if found.Source.Component != "keymount" {
		t.Errorf("event %s source component = %q, want keymount", reason, found.Source.Component)
	}
	return found
}

// podEvents lists the events about pod.
func (s *suite) podEvents(t *testing.T, pod *corev1.Pod) []corev1.Event {
	t.Helper()
	list, err := s.kube.CoreV1().Events(pod.Namespace).List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String(),
	})
	if err != nil {
		t.Fatalf("list events of pod %s: %v", pod.Name, err)
	}
	return list.Items
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// ownerUIDs lists the UIDs of an object's owner references that point to
// pods, sorted.
func ownerUIDs(refs []metav1.OwnerReference) []string {
	var uids []string
	for _, r := range refs {
		if r.APIVersion == "v1" && r.Kind == "Pod" {
			uids = append(uids, string(r.UID))
		}
	}
	slices.Sort(uids)
	return uids
}

func uids(pods ...*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, string(p.UID))
	}
	slices.Sort(out)
	return out
}

// clientKey is the key of an object.
func clientKey(o client.Object) client.ObjectKey {
	return client.ObjectKeyFromObject(o)
}
