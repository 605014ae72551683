//go:build integration

package restart_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// componentDir is the kustomize component of restart on change.
const componentDir = "../../deploy/components/restart-on-change/"

// controllerUser is the user the component's binding and policy name:
// keymount-controller's ServiceAccount.
const controllerUser = "system:serviceaccount:kube-system:keymount-controller"

// policyDenial is in every message of the component's policy.
const policyDenial = "keymount-controller may change only the keymount.io/rollout-* annotations"

// applyComponent applies every object of the component's files as
// shipped, with server-side apply.
func applyComponent(t *testing.T, a *apps, files ...string) {
	t.Helper()
	ap, err := a.env.NewApplier()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(componentDir + f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := dec.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if err := ap.Apply(t.Context(), obj, "keymount-test", "kube-system", false); err != nil {
				t.Fatalf("apply %s %s from %s: %v", obj.GetKind(), obj.GetName(), f, err)
			}
		}
	}
}

// patchAs is one patch of a workload, as a user.
type patchAs struct {
	name     string
	resource string // deployments, statefulsets, daemonsets
	object   string
	typ      types.PatchType
	patch    string
}

func (p patchAs) do(ctx context.Context, c kubernetes.Interface, ns string, dryRun bool) error {
	opts := metav1.PatchOptions{FieldManager: "keymount-test"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.AppsV1().RESTClient().Patch(p.typ).Namespace(ns).Resource(p.resource).Name(p.object).
		VersionedParams(&opts, metav1.ParameterCodec).Body([]byte(p.patch)).Do(ctx).Error()
}

// TestRestartAdmissionPolicy: with the component's RBAC rules and its
// ValidatingAdmissionPolicy applied as shipped, on the real API server, the
// keymount-controller's ServiceAccount restarts a Deployment (its rollout annotation is
// admitted) and may set rollout annotations on StatefulSets and DaemonSets,
// but every other change it tries — an image, replicas, another annotation,
// a label, both at once — is denied by the policy; an administrator's
// change of the image is admitted.
func TestRestartAdmissionPolicy(t *testing.T) {
	a := startOwnAPI(t) // own: it installs the component's ClusterRole and ValidatingAdmissionPolicy and asserts on them
	ns := a.namespace(t)
	d, rs := a.deployment(t, ns)
	for _, obj := range []any{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate()}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate()}},
	} {
		var err error
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			_, err = a.admin.AppsV1().StatefulSets(ns).Create(t.Context(), o, metav1.CreateOptions{})
		case *appsv1.DaemonSet:
			_, err = a.admin.AppsV1().DaemonSets(ns).Create(t.Context(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	applyComponent(t, a, "rbac.yaml", "admission.yaml")
	_, cfg := a.env.KubeconfigFor(t, controllerUser, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"})
	controllerClient := kubernetes.NewForConfigOrDie(cfg)

	image := func(resource, object string) patchAs {
		return patchAs{name: "the image of " + resource, resource: resource, object: object, typ: types.StrategicMergePatchType,
			patch: `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.example/evil:1"}]}}}}`}
	}
	rollout := func(resource, object string) patchAs {
		return patchAs{name: "a rollout annotation of " + resource, resource: resource, object: object, typ: types.MergePatchType,
			patch: fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"abc"}}}}}`, restart.AnnotationKey("other"))}
	}
	// The policy is in force once the API server's admission has loaded it
	// and RBAC lets the patch reach it: a dry run shows both.
	var last error
	err := poll.Wait(t.Context(), 60*time.Second, func(ctx context.Context) (bool, error) {
		last = image("deployments", d.Name).do(ctx, controllerClient, ns, true)
		return last != nil && strings.Contains(last.Error(), policyDenial), nil
	})
	if err != nil {
		t.Fatalf("the policy never denied the controller's image change: %v (last answer: %v)", err, last)
	}

	// A restart as the controller does it is admitted.
	ref := controllerRef("ReplicaSet", rs.Name, rs)
	p := a.pod(t, ns, "web-1-a", "node-a", "db", &ref, map[string]string{rotation.RestartAnnotation: "true"})
	res, err := newNode(t, cfg).r.Restart(t.Context(), restart.Change{Pod: p, Class: class(ns, "db", nil), Objects: objects("2")})
	if err != nil || !res.Patched {
		t.Fatalf("Restart as the controller = %+v, %v; want patched", res, err)
	}

	admitted := []patchAs{
		rollout("deployments", d.Name), rollout("statefulsets", "db"), rollout("daemonsets", "agent"),
		{name: "removing a rollout annotation", resource: "deployments", object: d.Name, typ: types.MergePatchType,
			patch: fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:null}}}}}`, restart.AnnotationKey("other"))},
	}
	denied := []patchAs{
		image("deployments", d.Name), image("statefulsets", "db"), image("daemonsets", "agent"),
		{name: "replicas", resource: "deployments", object: d.Name, typ: types.MergePatchType, patch: `{"spec":{"replicas":5}}`},
		{name: "another pod-template annotation", resource: "deployments", object: d.Name, typ: types.MergePatchType,
			patch: `{"spec":{"template":{"metadata":{"annotations":{"example.com/x":"1"}}}}}`},
		{name: "a pod-template label", resource: "statefulsets", object: "db", typ: types.MergePatchType,
			patch: `{"spec":{"template":{"metadata":{"labels":{"extra":"1"}}}}}`},
		{name: "the workload's labels", resource: "daemonsets", object: "agent", typ: types.MergePatchType,
			patch: `{"metadata":{"labels":{"extra":"1"}}}`},
		{name: "a rollout annotation and a command at once", resource: "deployments", object: d.Name, typ: types.StrategicMergePatchType,
			patch: fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"x"}},"spec":{"containers":[{"name":"app","command":["/bin/sh"]}]}}}}`,
				restart.AnnotationKey("db"))},
	}
	for _, pa := range admitted {
		if err := pa.do(t.Context(), controllerClient, ns, false); err != nil {
			t.Errorf("the controller's patch of %s: %v, want admitted", pa.name, err)
		}
	}
	for _, pa := range denied {
		err := pa.do(t.Context(), controllerClient, ns, false)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policyDenial) {
			t.Errorf("the controller's patch of %s: %v, want denied by the policy", pa.name, err)
		}
	}
	got := a.getDeployment(t, ns, d.Name)
	if img := got.Spec.Template.Spec.Containers[0].Image; img != "registry.example/app:1" || *got.Spec.Replicas != 2 {
		t.Errorf("the Deployment changed: image %s, replicas %d", img, *got.Spec.Replicas)
	}
	if got.Spec.Template.Annotations[restart.AnnotationKey("db")] != restart.AnnotationValue(objects("2")) {
		t.Errorf("the restart's annotation is gone: %v", got.Spec.Template.Annotations)
	}
	// The policy binds the controller alone.
	if err := image("deployments", d.Name).do(t.Context(), a.admin, ns, false); err != nil {
		t.Errorf("an administrator's image change: %v, want admitted", err)
	}
}
