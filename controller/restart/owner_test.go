package restart

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/internal/kube"
)

// appsServer answers GETs of apps/v1 objects by path, as the API server
// does, and records the paths asked.
type appsServer struct {
	objects map[string]any // "/apis/apps/v1/namespaces/ns/replicasets/x"
	status  int            // when set, every answer fails with it

	mu    sync.Mutex
	asked []string
}

func (s *appsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.asked = append(s.asked, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	obj, ok := s.objects[r.URL.Path]
	code := s.status
	if code == 0 && !ok {
		code = http.StatusNotFound
	}
	if code != 0 {
		st := apierrors.NewGenericServerResponse(code, r.Method, schema.GroupResource{Group: "apps", Resource: "replicasets"}, "x", "", 0, false).ErrStatus
		st.APIVersion, st.Kind = "v1", "Status"
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(st)
		return
	}
	_ = json.NewEncoder(w).Encode(obj)
}

func (s *appsServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// restarterFor returns a Restarter whose apps client talks to s.
func restarterFor(t *testing.T, s *appsServer) *Restarter {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	apps, err := kube.NewRESTClient(&rest.Config{Host: srv.URL}, GroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	return New(apps, nil)
}

func controller(apiVersion, kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}
}

// appsObject is an apps/v1 object as the API server returns it: metadata
// and a selector of matchLabels (nil: none).
func appsObject(kind, name, uid string, objLabels, selector map[string]string, owners ...metav1.OwnerReference) map[string]any {
	spec := map[string]any{}
	if selector != nil {
		spec["selector"] = &metav1.LabelSelector{MatchLabels: selector}
	}
	return map[string]any{
		"apiVersion": "apps/v1", "kind": kind,
		"metadata": metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), Labels: objLabels, OwnerReferences: owners},
		"spec":     spec,
	}
}

const (
	rsPath  = "/apis/apps/v1/namespaces/ns/replicasets/"
	depPath = "/apis/apps/v1/namespaces/ns/deployments/"
	stsPath = "/apis/apps/v1/namespaces/ns/statefulsets/"
	dsPath  = "/apis/apps/v1/namespaces/ns/daemonsets/"
)

// TestOwner: the owner of a pod is confirmed as its controller confirms it:
// each controller of the chain exists with the UID named and selects the
// pod (and a Deployment its ReplicaSet); anything else is no workload, with
// the reason.
func TestOwner(t *testing.T) {
	web := controller("apps/v1", "Deployment", "web", "d1")
	podLabels := map[string]string{"app": "web", "pod-template-hash": "1"}
	rsLabels := podLabels
	objects := map[string]any{
		rsPath + "web-1":     appsObject("ReplicaSet", "web-1", "rs1", rsLabels, podLabels, web),
		rsPath + "bare-rs":   appsObject("ReplicaSet", "bare-rs", "rs2", rsLabels, podLabels),
		rsPath + "odd-rs":    appsObject("ReplicaSet", "odd-rs", "rs3", rsLabels, podLabels, controller("example.com/v1", "Deployment", "x", "o1")),
		rsPath + "renamed":   appsObject("ReplicaSet", "renamed", "rs-new", rsLabels, podLabels, web),
		rsPath + "other-rs":  appsObject("ReplicaSet", "other-rs", "rs4", map[string]string{"app": "pay"}, map[string]string{"app": "pay"}, web),
		rsPath + "nosel-rs":  appsObject("ReplicaSet", "nosel-rs", "rs5", rsLabels, nil, web),
		rsPath + "stray-rs":  appsObject("ReplicaSet", "stray-rs", "rs6", map[string]string{"app": "pay"}, podLabels, web),
		rsPath + "to-gone":   appsObject("ReplicaSet", "to-gone", "rs7", rsLabels, podLabels, controller("apps/v1", "Deployment", "gone", "d9")),
		rsPath + "to-pay":    appsObject("ReplicaSet", "to-pay", "rs8", rsLabels, podLabels, controller("apps/v1", "Deployment", "pay", "d2")),
		depPath + "web":      appsObject("Deployment", "web", "d1", nil, map[string]string{"app": "web"}),
		depPath + "pay":      appsObject("Deployment", "pay", "d2", nil, map[string]string{"app": "pay"}),
		stsPath + "db":       appsObject("StatefulSet", "db", "s1", nil, map[string]string{"app": "web"}),
		stsPath + "other-db": appsObject("StatefulSet", "other-db", "s2", nil, map[string]string{"app": "db"}),
		dsPath + "agent":     appsObject("DaemonSet", "agent", "ds1", nil, map[string]string{"app": "web"}),
		dsPath + "nosel":     appsObject("DaemonSet", "nosel", "ds2", nil, map[string]string{}),
	}
	notController := controller("apps/v1", "StatefulSet", "db", "s1")
	notController.Controller = nil
	rsRef := func(name, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", name, uid)}
	}
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		labels map[string]string // the pod's; podLabels when nil
		want   Workload
		reason string // in an ErrNoWorkload error
		asked  []string
	}{
		{
			name: "Deployment through its ReplicaSet", owners: rsRef("web-1", "rs1"),
			want: Workload{Kind: KindDeployment, Namespace: "ns", Name: "web", UID: "d1"}, asked: []string{"GET " + rsPath + "web-1", "GET " + depPath + "web"},
		},
		{
			name: "StatefulSet", owners: []metav1.OwnerReference{controller("apps/v1", "StatefulSet", "db", "s1")},
			want: Workload{Kind: KindStatefulSet, Namespace: "ns", Name: "db", UID: "s1"}, asked: []string{"GET " + stsPath + "db"},
		},
		{
			name: "DaemonSet", owners: []metav1.OwnerReference{controller("apps/v1", "DaemonSet", "agent", "ds1")},
			want: Workload{Kind: KindDaemonSet, Namespace: "ns", Name: "agent", UID: "ds1"}, asked: []string{"GET " + dsPath + "agent"},
		},
		{name: "bare pod", reason: "the pod has no controller"},
		{name: "owner that is no controller", owners: []metav1.OwnerReference{notController}, reason: "the pod has no controller"},
		{name: "Job", owners: []metav1.OwnerReference{controller("batch/v1", "Job", "migrate", "j1")}, reason: "controller is Job migrate"},
		{name: "another group's StatefulSet", owners: []metav1.OwnerReference{controller("example.com/v1", "StatefulSet", "x", "x1")}, reason: "controller is StatefulSet x"},
		{name: "ControllerRevision", owners: []metav1.OwnerReference{controller("apps/v1", "ControllerRevision", "x", "x1")}, reason: "controller is ControllerRevision x"},
		{
			name: "ReplicaSet without a Deployment", owners: rsRef("bare-rs", "rs2"),
			reason: "no Deployment controls the pod's ReplicaSet bare-rs", asked: []string{"GET " + rsPath + "bare-rs"},
		},
		{
			name: "ReplicaSet controlled by another group's Deployment", owners: rsRef("odd-rs", "rs3"),
			reason: "no Deployment controls", asked: []string{"GET " + rsPath + "odd-rs"},
		},
		{
			name: "ReplicaSet gone", owners: rsRef("gone", "rs9"),
			reason: "ReplicaSet gone is gone", asked: []string{"GET " + rsPath + "gone"},
		},
		{
			name: "ReplicaSet replaced under the same name", owners: rsRef("renamed", "rs-old"),
			reason: "ReplicaSet renamed is gone", asked: []string{"GET " + rsPath + "renamed"},
		},
		{
			name: "a ReplicaSet that does not select the pod", owners: rsRef("other-rs", "rs4"),
			reason: "names ReplicaSet other-rs as its controller, but its selector app=pay does not match the pod's labels",
			asked:  []string{"GET " + rsPath + "other-rs"},
		},
		{
			name: "the right ReplicaSet, the pod's labels changed", owners: rsRef("web-1", "rs1"), labels: map[string]string{"app": "web"},
			reason: "ReplicaSet web-1 as its controller, but its selector", asked: []string{"GET " + rsPath + "web-1"},
		},
		{
			name: "a ReplicaSet without a selector", owners: rsRef("nosel-rs", "rs5"),
			reason: "ReplicaSet nosel-rs has no usable selector", asked: []string{"GET " + rsPath + "nosel-rs"},
		},
		{
			name: "a Deployment that does not select the ReplicaSet", owners: rsRef("stray-rs", "rs6"),
			reason: "names Deployment web as its controller, but its selector app=web does not match",
			asked:  []string{"GET " + rsPath + "stray-rs", "GET " + depPath + "web"},
		},
		{
			name: "a Deployment that does not select the pod", owners: rsRef("to-pay", "rs8"),
			reason: "names Deployment pay as its controller, but its selector app=pay does not match",
			asked:  []string{"GET " + rsPath + "to-pay", "GET " + depPath + "pay"},
		},
		{
			name: "a ReplicaSet whose Deployment is gone", owners: rsRef("to-gone", "rs7"),
			reason: "Deployment gone is gone", asked: []string{"GET " + rsPath + "to-gone", "GET " + depPath + "gone"},
		},
		{
			name: "a StatefulSet claimed by UID it does not have", owners: []metav1.OwnerReference{controller("apps/v1", "StatefulSet", "db", "s-forged")},
			reason: "StatefulSet db is gone", asked: []string{"GET " + stsPath + "db"},
		},
		{
			name: "a StatefulSet that does not select the pod", owners: []metav1.OwnerReference{controller("apps/v1", "StatefulSet", "other-db", "s2")},
			reason: "StatefulSet other-db as its controller, but its selector app=db", asked: []string{"GET " + stsPath + "other-db"},
		},
		{
			name: "a DaemonSet with an empty selector", owners: []metav1.OwnerReference{controller("apps/v1", "DaemonSet", "nosel", "ds2")},
			reason: "DaemonSet nosel has no usable selector", asked: []string{"GET " + dsPath + "nosel"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &appsServer{objects: objects}
			r := restarterFor(t, s)
			l := tc.labels
			if l == nil {
				l = podLabels
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: l, OwnerReferences: tc.owners}}
			got, err := r.Owner(t.Context(), pod)
			switch {
			case tc.reason != "":
				if !errors.Is(err, ErrNoWorkload) || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("Owner = %v, %v; want ErrNoWorkload saying %q", got, err, tc.reason)
				}
			case err != nil || got != tc.want:
				t.Errorf("Owner = %v, %v; want %v", got, err, tc.want)
			}
			if asked := s.requests(); strings.Join(asked, ",") != strings.Join(tc.asked, ",") {
				t.Errorf("requests %q, want %q", asked, tc.asked)
			}
		})
	}
}

// TestOwnerAPIErrors: an API failure is the API server's error, not
// ErrNoWorkload: it is worth a warning, not a shrug.
func TestOwnerAPIErrors(t *testing.T) {
	tests := []struct {
		code int
		is   func(error) bool
	}{
		{http.StatusForbidden, apierrors.IsForbidden},
		{http.StatusInternalServerError, apierrors.IsInternalError},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			r := restarterFor(t, &appsServer{status: tc.code})
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
				OwnerReferences: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "web-1", "rs1")}}}
			_, err := r.Owner(t.Context(), pod)
			if errors.Is(err, ErrNoWorkload) || !tc.is(err) {
				t.Errorf("Owner error %v, want the server's %d", err, tc.code)
			}
		})
	}
}
