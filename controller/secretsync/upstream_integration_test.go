//go:build integration

package secretsync_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	secretsync "github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/poll"
)

// e2eProvider answers as the sync controller's e2e provider: the class's
// objects parameter is {array: [<YAML of {objectName, objectVersion}>]},
// every object's content is "secret". It keeps the last request.
type e2eProvider struct {
	mu   sync.Mutex
	last *server.MountRequest
}

func (p *e2eProvider) Mount(_ context.Context, req *server.MountRequest) (*server.MountResult, error) {
	p.mu.Lock()
	p.last = req
	p.mu.Unlock()
	var objects struct {
		Array []string `json:"array"`
	}
	if err := yaml.Unmarshal([]byte(req.Attributes["objects"]), &objects); err != nil {
		return nil, fmt.Errorf("objects: %w", server.ErrInvalidParameters)
	}
	res := &server.MountResult{}
	for _, o := range objects.Array {
		var obj struct {
			ObjectName    string `json:"objectName"`
			ObjectVersion string `json:"objectVersion"`
		}
		if err := yaml.Unmarshal([]byte(o), &obj); err != nil {
			return nil, fmt.Errorf("object: %w", server.ErrInvalidParameters)
		}
		res.Files = append(res.Files, server.File{Path: obj.ObjectName, Contents: []byte("secret")})
		res.Versions = append(res.Versions, server.ObjectVersion{ID: obj.ObjectName, Version: obj.ObjectVersion})
	}
	return res, nil
}

func (p *e2eProvider) lastRequest() *server.MountRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// manifest decodes a file of the API's testdata (the sync controller's
// docs and e2e manifests) into obj, in namespace ns.
func manifest(t *testing.T, file, ns string, obj client.Object) {
	t.Helper()
	b, err := os.ReadFile("../../apis/secretsync/v1alpha1/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	obj.SetNamespace(ns)
}

// TestUpstreamE2EManifests: the sync controller's own e2e class
// (e2e-providerspc) and SecretSync (sse2esecret), applied unchanged, give
// the Secret its e2e suite expects (bar: "secret", one owner) from a
// provider speaking its e2e provider's protocol, which receives the request
// the sync controller sends; its negative cases fail as there: an invalid
// label or annotation key (ControllerPatchError with the API server's
// message), a class in another namespace (SecretProviderClassMisconfigured).
func TestUpstreamE2EManifests(t *testing.T) {
	f := startFixture(t, secretsync.Config{})
	p := &e2eProvider{}
	ctrltest.ServeProvider(t, f.socks, "e2e-provider", p)
	ns, other := f.namespace(t, "test-v1alpha1"), f.namespace(t, "test-other")
	for _, n := range []string{ns, other} {
		if err := f.c.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"}}); err != nil {
			t.Fatal(err)
		}
	}
	var class secretsstorev1.SecretProviderClass
	manifest(t, "e2e-providerspc.yaml", ns, &class)
	if err := f.c.Create(t.Context(), &class); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"accepted/sse2esecret.yaml", "accepted/invalid_label_key.yaml", "accepted/invalid_annotation_key.yaml"} {
		var ss ss1.SecretSync
		manifest(t, file, ns, &ss)
		if err := f.c.Create(t.Context(), &ss); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var elsewhere ss1.SecretSync
	manifest(t, "accepted/sse2esecret.yaml", other, &elsewhere)
	if err := f.c.Create(t.Context(), &elsewhere); err != nil {
		t.Fatal(err)
	}

	key := types.NamespacedName{Namespace: ns, Name: "sse2esecret"}
	ready := f.waitReady(t, key)
	s := f.secret(t, key)
	if string(s.Data["bar"]) != "secret" || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != ready.UID {
		t.Errorf("Secret sse2esecret: bar %q, owners %+v; want \"secret\" and exactly the SecretSync", s.Data["bar"], s.OwnerReferences)
	}
	if len(ready.Status.Objects) != 1 || ready.Status.Objects[0] != (ss1.SecretSyncObject{ID: "foo", Version: "v1"}) {
		t.Errorf("status.objects %+v, want foo at v1", ready.Status.Objects)
	}
	checkUpstreamRequest(t, p.lastRequest(), ns)

	for name, what := range map[string]string{"sse2einvalidlabelsecret": "labels", "sse2einvalidannotationssecret": "annotations"} {
		k := types.NamespacedName{Namespace: ns, Name: name}
		var got *ss1.SecretSync
		poll.Until(t, name+" ControllerPatchError", func(ctx context.Context) (bool, error) {
			got = f.get(t, k)
			return conditionIs(got, ss1.ConditionSecretCreated, metav1.ConditionFalse, ss1.ReasonControllerPatchError), nil
		})
		msg := conditionMessage(got, ss1.ConditionSecretCreated)
		if !strings.HasPrefix(msg, fmt.Sprintf("failed to patch secret %q: ", name)) || !strings.Contains(msg, "metadata."+what) {
			t.Errorf("%s: message %q, want v0.0.5's format with the API server's refusal of metadata.%s", name, msg, what)
		}
	}
	poll.Until(t, "the class of another namespace refused", func(ctx context.Context) (bool, error) {
		got := f.get(t, types.NamespacedName{Namespace: other, Name: "sse2esecret"})
		return conditionIs(got, ss1.ConditionSecretCreated, metav1.ConditionFalse, ss1.ReasonSecretProviderClassMisconfigured), nil
	})
}

// checkUpstreamRequest: the provider got what the sync controller sends.
func checkUpstreamRequest(t *testing.T, req *server.MountRequest, ns string) {
	t.Helper()
	if req == nil {
		t.Fatal("the e2e provider was never called")
	}
	a := req.Attributes
	if a[syncrequest.AttrPodNamespace] != ns || a[syncrequest.AttrServiceAccountName] != "default" ||
		a[syncrequest.AttrPodName] != "keymount-controller-0" || !strings.Contains(a[syncrequest.AttrTokens], `"`+audience+`"`) {
		t.Errorf("attributes (keys %d): pod namespace %q, service account %q, pod %q, tokens for %s: %t",
			len(a), a[syncrequest.AttrPodNamespace], a[syncrequest.AttrServiceAccountName], a[syncrequest.AttrPodName], audience,
			strings.Contains(a[syncrequest.AttrTokens], `"`+audience+`"`))
	}
	if len(req.Secrets) != 0 || req.Permission != 0o644 || req.TargetPath != syncrequest.TargetPath {
		t.Errorf("secrets %d, permission %o, target %q; want none, 0644, %s", len(req.Secrets), req.Permission, req.TargetPath, syncrequest.TargetPath)
	}
}

func conditionMessage(ss *ss1.SecretSync, typ string) string {
	for _, c := range ss.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}
