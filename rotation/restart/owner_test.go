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
	return New(apps, "secrets-store.csi.k8s.io", nil)
}

func controller(apiVersion, kind, name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: new(true)}
}

func replicaSet(name, uid string, owners ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), OwnerReferences: owners},
	}
}

const rsPath = "/apis/apps/v1/namespaces/ns/replicasets/"

func TestOwner(t *testing.T) {
	web := controller("apps/v1", "Deployment", "web", "d1")
	objects := map[string]any{
		rsPath + "web-1":   replicaSet("web-1", "rs1", web),
		rsPath + "bare-rs": replicaSet("bare-rs", "rs2"),
		rsPath + "odd-rs":  replicaSet("odd-rs", "rs3", controller("example.com/v1", "Deployment", "x", "o1")),
		rsPath + "renamed": replicaSet("renamed", "rs-new", web),
	}
	notController := controller("apps/v1", "StatefulSet", "db", "s1")
	notController.Controller = nil
	tests := []struct {
		name   string
		owners []metav1.OwnerReference
		want   Workload
		reason string // in an ErrNoWorkload error
		asked  []string
	}{
		{
			name: "Deployment through its ReplicaSet", owners: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "web-1", "rs1")},
			want: Workload{Kind: KindDeployment, Namespace: "ns", Name: "web", UID: "d1"}, asked: []string{"GET " + rsPath + "web-1"},
		},
		{
			name: "StatefulSet", owners: []metav1.OwnerReference{controller("apps/v1", "StatefulSet", "db", "s1")},
			want: Workload{Kind: KindStatefulSet, Namespace: "ns", Name: "db", UID: "s1"},
		},
		{
			name: "DaemonSet", owners: []metav1.OwnerReference{controller("apps/v1", "DaemonSet", "agent", "ds1")},
			want: Workload{Kind: KindDaemonSet, Namespace: "ns", Name: "agent", UID: "ds1"},
		},
		{name: "bare pod", reason: "the pod has no controller"},
		{name: "owner that is no controller", owners: []metav1.OwnerReference{notController}, reason: "the pod has no controller"},
		{name: "Job", owners: []metav1.OwnerReference{controller("batch/v1", "Job", "migrate", "j1")}, reason: "controller is Job migrate"},
		{name: "another group's StatefulSet", owners: []metav1.OwnerReference{controller("example.com/v1", "StatefulSet", "x", "x1")}, reason: "controller is StatefulSet x"},
		{name: "ControllerRevision", owners: []metav1.OwnerReference{controller("apps/v1", "ControllerRevision", "x", "x1")}, reason: "controller is ControllerRevision x"},
		{
			name: "ReplicaSet without a Deployment", owners: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "bare-rs", "rs2")},
			reason: "no Deployment controls the pod's ReplicaSet bare-rs", asked: []string{"GET " + rsPath + "bare-rs"},
		},
		{
			name: "ReplicaSet controlled by another group's Deployment", owners: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "odd-rs", "rs3")},
			reason: "no Deployment controls", asked: []string{"GET " + rsPath + "odd-rs"},
		},
		{
			name: "ReplicaSet gone", owners: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "gone", "rs9")},
			reason: "ReplicaSet gone is gone", asked: []string{"GET " + rsPath + "gone"},
		},
		{
			name: "ReplicaSet replaced under the same name", owners: []metav1.OwnerReference{controller("apps/v1", "ReplicaSet", "renamed", "rs-old")},
			reason: "ReplicaSet renamed is gone", asked: []string{"GET " + rsPath + "renamed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &appsServer{objects: objects}
			r := restarterFor(t, s)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", OwnerReferences: tc.owners}}
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
