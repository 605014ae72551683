package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// TestInlineVolume mounts one inline volume the way kubelet does and checks
// the files, the read-only mount, the pod status, an unchanged republish
// and the unpublish.
func TestInlineVolume(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	password := []byte("s3cr3t-" + randomHex(8))
	config := []byte(`{"debug": false}`)
	n.writeObject(t, "db/password", password)
	n.writeObject(t, "app/config.json", config)
	spc := n.createClass(t, ns, "app", "local", []object{
		{name: "db/password", alias: "password"},
		{name: "app/config.json", alias: "config.json", mode: "0600"},
	})
	pod := n.createPod(t, ns, "web", secretsVolume{name: "secrets", class: "app"})

	info, err := n.csi.NodeGetInfo(t.Context(), &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != n.name {
		t.Errorf("NodeGetInfo = %v, %v; want node ID %s", info, err, n.name)
	}

	n.mustPublish(t, pod, "secrets")
	target := n.targetPath(pod, "secrets")
	for name, want := range map[string]struct {
		content []byte
		mode    os.FileMode
	}{"password": {password, 0o644}, "config.json": {config, 0o600}} {
		if got := readFile(t, target, name); got != string(want.content) {
			t.Errorf("%s = %q, want %q", name, got, want.content)
		}
		fi, err := os.Stat(filepath.Join(target, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want.mode {
			t.Errorf("%s mode = %v, want %v", name, fi.Mode().Perm(), want.mode)
		}
	}
	m := mountAt(t, target)
	if m == nil {
		t.Fatalf("the target %s is not a mount point", target)
	}
	if !slices.Contains(strings.Split(m.Options, ","), "ro") {
		t.Errorf("the target is mounted %q, want read-only (the pod's volume has readOnly: true)", m.Options)
	}
	if err := os.WriteFile(filepath.Join(target, "intruder"), []byte("x"), 0o600); err == nil {
		t.Errorf("writing into the read-only volume succeeded")
	}

	st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{
		"db/password": password, "app/config.json": config,
	}})

	// Kubelet republishes a mounted volume about once a minute.
	n.republishUnchanged(t, pod, "secrets", st, nil)

	n.mustUnpublish(t, pod, "secrets")
	n.s.waitForStatusGone(t, pod, "app", "NodeUnpublishVolume")
	if ms := mountsUnder(t, n.dir); len(ms) > 0 {
		t.Errorf("mounts left after NodeUnpublishVolume: %v", ms)
	}
	// Kubelet retries an unpublish whose answer it did not see.
	if _, err := n.csi.NodeUnpublishVolume(t.Context(), &csi.NodeUnpublishVolumeRequest{
		VolumeId: volumeID(pod, "secrets"), TargetPath: target,
	}); err != nil {
		t.Errorf("a second NodeUnpublishVolume: %v, want success", err)
	}
}

// rvOf is an object's resourceVersion, "(none)" for no object.
func rvOf[T any, P interface {
	*T
	GetResourceVersion() string
}](o P) string {
	if o == nil {
		return "(none)"
	}
	return o.GetResourceVersion()
}

// TestClassCreatedWithPod creates a class and at once publishes a volume
// of it, with the request already built (pod created, tokens minted), so
// the driver's watch has had no time to deliver the class (upstream #1436:
// such a class was "not found"): the driver must read it live on a cache
// miss. Which path serves each class depends on that race; every publish
// must succeed, and the test reports how many went through a live read.
func TestClassCreatedWithPod(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	token := []byte("fresh-" + randomHex(8))
	n.writeObject(t, "token", token)

	const rounds = 3
	from := n.s.auditMark(t)
	for i := range rounds {
		name := fmt.Sprintf("fresh-%d", i)
		pod := n.createPod(t, ns, name, secretsVolume{name: "secrets", class: name})
		req := n.publishRequest(t, pod, "secrets")
		spc := n.createClass(t, ns, name, "local", []object{{name: "token"}},
			&secretsstorev1.SecretObject{SecretName: name, Data: []*secretsstorev1.SecretObjectData{{ObjectName: "token", Key: "token"}}})
		if _, err := n.csi.NodePublishVolume(t.Context(), req); err != nil {
			t.Fatalf("NodePublishVolume right after the class %s was created: %v", name, err)
		}

		if got := readFile(t, n.targetPath(pod, "secrets"), "token"); got != string(token) {
			t.Errorf("%s: token = %q, want %q", name, got, token)
		}
		n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"token": token},
			synced: metav1.ConditionTrue})
		n.s.waitForSecret(t, ns, name, syncedMeta(name, pod), hasData(map[string][]byte{"token": token}))
		n.mustUnpublish(t, pod, "secrets")
	}
	to := n.s.auditMark(t)

	live := 0
	for _, e := range n.s.requestsBetween(t, driverUser, from, to) {
		if e.Verb == "get" && e.ObjectRef != nil && e.ObjectRef.Resource == "secretproviderclasses" {
			live++
		}
	}
	t.Logf("%d of %d classes were read live after a cache miss", live, rounds)
}

// TestNodePublishSecretRef publishes a volume with a nodePublishSecretRef:
// kubelet passes the Secret's data in the request, and neither it nor the
// service account token may show up in the driver's or the provider's
// logs, in the pod status or in events.
func TestNodePublishSecretRef(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	clientSecret := "client-secret-" + randomHex(16)
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"clientID": "id-" + randomHex(6), "clientSecret": clientSecret},
	}
	if _, err := n.s.kube.CoreV1().Secrets(ns).Create(t.Context(), creds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	content := []byte("api-key-" + randomHex(8))
	n.writeObject(t, "api-key", content)
	spc := n.createClass(t, ns, "with-creds", "local", []object{{name: "api-key"}})
	pod := n.createPod(t, ns, "client", secretsVolume{name: "secrets", class: "with-creds", secretRef: "creds"})

	req := n.publishRequest(t, pod, "secrets")
	if req.GetSecrets()["clientSecret"] != clientSecret {
		t.Fatalf("kubelet emulation: the request does not carry the nodePublishSecretRef data")
	}
	if _, err := n.csi.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatalf("NodePublishVolume with a nodePublishSecretRef: %v", err)
	}
	if got := readFile(t, n.targetPath(pod, "secrets"), "api-key"); got != string(content) {
		t.Errorf("api-key = %q, want %q", got, content)
	}
	// A failing publish logs its error: make one with the same secrets.
	bad := n.publishRequest(t, pod, "secrets")
	bad.VolumeContext[attrClass] = "absent"
	bad.VolumeId, bad.TargetPath = volumeID(pod, "other"), n.targetPath(pod, "other")
	if _, err := n.csi.NodePublishVolume(t.Context(), bad); err == nil {
		t.Errorf("NodePublishVolume of a missing class succeeded")
	}

	st := n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"api-key": content}})
	// Events are sent in the background: wait for the failure's.
	n.s.waitForEvent(t, pod, corev1.EventTypeWarning, "SecretMountFailed", "absent")
	stJSON, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	texts = append(texts, string(stJSON))
	for _, e := range n.s.podEvents(t, pod) {
		texts = append(texts, e.Message)
	}
	for _, f := range n.forbiddenValues() {
		for _, text := range texts {
			if strings.Contains(text, f.value) {
				t.Errorf("the pod status or an event holds %s", f.label)
			}
		}
	}
	n.checkLogs(t) // now, and again at cleanup once the processes have exited
	n.mustUnpublish(t, pod, "secrets")
}

// TestTwoVolumesTwoClasses mounts two volumes of one pod from two classes:
// each has its own pod status, and unpublishing one leaves the other.
func TestTwoVolumesTwoClasses(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	alpha, beta := []byte("alpha-"+randomHex(4)), []byte("beta-"+randomHex(4))
	n.writeObject(t, "alpha", alpha)
	n.writeObject(t, "beta", beta)
	spcA := n.createClass(t, ns, "class-a", "local", []object{{name: "alpha"}})
	spcB := n.createClass(t, ns, "class-b", "local", []object{{name: "beta"}})
	pod := n.createPod(t, ns, "twice",
		secretsVolume{name: "vol-a", class: "class-a"},
		secretsVolume{name: "vol-b", class: "class-b"})

	n.mustPublish(t, pod, "vol-a")
	n.mustPublish(t, pod, "vol-b")
	if got := readFile(t, n.targetPath(pod, "vol-a"), "alpha"); got != string(alpha) {
		t.Errorf("vol-a/alpha = %q, want %q", got, alpha)
	}
	if got := readFile(t, n.targetPath(pod, "vol-b"), "beta"); got != string(beta) {
		t.Errorf("vol-b/beta = %q, want %q", got, beta)
	}
	if _, err := os.Stat(filepath.Join(n.targetPath(pod, "vol-a"), "beta")); !os.IsNotExist(err) {
		t.Errorf("vol-a holds beta (%v): the volumes are mixed up", err)
	}
	n.checkPodStatus(t, pod, wantStatus{volume: "vol-a", class: spcA, objects: map[string][]byte{"alpha": alpha}})
	n.checkPodStatus(t, pod, wantStatus{volume: "vol-b", class: spcB, objects: map[string][]byte{"beta": beta}})

	n.mustUnpublish(t, pod, "vol-a")
	n.s.waitForStatusGone(t, pod, "class-a", "its volume was unpublished")
	n.checkPodStatus(t, pod, wantStatus{volume: "vol-b", class: spcB, objects: map[string][]byte{"beta": beta}})
	if got := readFile(t, n.targetPath(pod, "vol-b"), "beta"); got != string(beta) {
		t.Errorf("vol-b/beta after vol-a was unpublished = %q, want %q", got, beta)
	}
	n.mustUnpublish(t, pod, "vol-b")
	n.s.waitForStatusGone(t, pod, "class-b", "its volume was unpublished")
}
