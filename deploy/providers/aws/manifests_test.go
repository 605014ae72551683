// Package aws_test renders deploy/providers/aws as `kubectl apply -k` does
// and checks what the AWS provider needs from it.
package aws_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// render returns the DaemonSet and the ClusterRole of the kustomization.
func render(t *testing.T) (*appsv1.DaemonSet, *rbacv1.ClusterRole) {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var ds *appsv1.DaemonSet
	var role *rbacv1.ClusterRole
	for _, r := range res.Resources() {
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			err = yaml.UnmarshalStrict(data, ds)
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			err = yaml.UnmarshalStrict(data, role)
		}
		if err != nil {
			t.Fatalf("%s: %v", r.GetKind(), err)
		}
	}
	if ds == nil || role == nil {
		t.Fatal("no DaemonSet or ClusterRole rendered")
	}
	return ds, role
}

// TestNodeRegion: the provider knows its node (NODE_NAME from the downward
// API) for classes without a region, may read that node (and pods, for a
// provider started without NODE_NAME, as the existing one is), and no empty
// AWS_REGION hides the node's label.
func TestNodeRegion(t *testing.T) {
	ds, role := render(t)
	c := ds.Spec.Template.Spec.Containers[0]
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "NODE_NAME" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.FieldRef == nil || c.Env[i].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("NODE_NAME is not the downward API's spec.nodeName: %+v", c.Env)
	}
	for _, e := range c.Env {
		if e.Value == "" && e.ValueFrom == nil {
			t.Errorf("env %s is set empty", e.Name)
		}
	}
	var got []string
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) {
			continue // TestTokenProofRBAC
		}
		if !slices.Equal(r.Verbs, []string{"get"}) {
			t.Errorf("rule %+v: want get in the core group only", r)
		}
		got = append(got, r.Resources...)
	}
	slices.Sort(got)
	if want := []string{"nodes", "pods", "serviceaccounts"}; !slices.Equal(got, want) {
		t.Errorf("resources %v, want %v", got, want)
	}
}

// TestTokenProofRBAC: the provider may read the service account issuer's
// discovery document and keys and create TokenReviews (to prove each
// mount's token), and nothing else outside the core group's reads.
func TestTokenProofRBAC(t *testing.T) {
	_, role := render(t)
	var urls, reviews, other []string
	for _, r := range role.Rules {
		switch {
		case len(r.NonResourceURLs) > 0 && slices.Equal(r.Verbs, []string{"get"}):
			urls = append(urls, r.NonResourceURLs...)
		case slices.Equal(r.APIGroups, []string{"authentication.k8s.io"}) && slices.Equal(r.Verbs, []string{"create"}):
			reviews = append(reviews, r.Resources...)
		case slices.Equal(r.APIGroups, []string{""}):
		default:
			other = append(other, fmt.Sprintf("%+v", r))
		}
	}
	slices.Sort(urls)
	if want := []string{"/.well-known/openid-configuration", "/openid/v1/jwks"}; !slices.Equal(urls, want) {
		t.Errorf("non-resource URLs %v, want %v", urls, want)
	}
	if !slices.Equal(reviews, []string{"tokenreviews"}) {
		t.Errorf("authentication.k8s.io create on %v, want tokenreviews", reviews)
	}
	if len(other) > 0 {
		t.Errorf("other rules: %v", other)
	}
}

// TestToleratesEveryTaint: the provider runs wherever the driver runs (it
// tolerates every taint), or pods on tainted nodes cannot mount.
func TestToleratesEveryTaint(t *testing.T) {
	ds, _ := render(t)
	everything := corev1.Toleration{Operator: corev1.TolerationOpExists}
	if !slices.Contains(ds.Spec.Template.Spec.Tolerations, everything) {
		t.Errorf("tolerations %+v: want {operator: Exists} (every key, every effect), as the driver's", ds.Spec.Template.Spec.Tolerations)
	}
}
