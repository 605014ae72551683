package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/tests/ctrltest"
)

// TestDriverWithUpstreamFlags: the driver started with exactly the
// arguments upstream's manifests render (plus the node's paths and API
// credentials) publishes a pod's volume, reports its status, syncs its
// secretObjects as upstream does when its chart granted the Secret rules
// (no keymount flag asked for it), says once which flags it ignores, and
// keeps upstream's meaning of --enable-secret-rotation=false: a republish
// refreshes nothing.
func TestDriverWithUpstreamFlags(t *testing.T) {
	n := startNode(t, nodeOptions{upstreamFlags: true})
	if slices.ContainsFunc(n.driverArgs, func(a string) bool { return strings.HasPrefix(a, "--sync-secrets") }) {
		t.Fatalf("the driver runs with %q: upstream has no such flag", n.driverArgs)
	}
	ns := n.newNamespace(t)
	content := []byte("up-" + randomHex(6))
	n.writeObject(t, "flags/key", content)
	spc := n.createClass(t, ns, "flags", "local", []object{{name: "flags/key", alias: "key"}},
		&secretsstorev1.SecretObject{SecretName: "flags", Type: "Opaque", Data: []*secretsstorev1.SecretObjectData{{ObjectName: "key", Key: "key"}}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "flags"})
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, n.targetPath(pod, "secrets"), "key"); got != string(content) {
		t.Errorf("key = %q", got)
	}
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, objects: map[string][]byte{"flags/key": content}, synced: metav1.ConditionTrue})
	n.s.waitForSecret(t, ns, "flags", syncedMeta("flags", pod), hasData(map[string][]byte{"key": content}))
	log, err := os.ReadFile(n.driverLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--metrics-addr", "--enable-secret-rotation", "--rotation-poll-interval", "--provider-health-check"} {
		if strings.Contains(string(log), `"ignoring a flag keymount does not need" flag="`+flag+`"`) {
			t.Errorf("the driver ignores %s; it has upstream's meaning", flag)
		}
	}
	// --enable-secret-rotation=false, as upstream renders it: a republish
	// keeps what the first publish mounted, whatever the store holds now.
	n.writeObject(t, "flags/key", []byte("changed-"+randomHex(6)))
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, n.targetPath(pod, "secrets"), "key"); got != string(content) {
		t.Errorf("after a republish with rotation off, key = %q, want the first publish's %q", got, content)
	}
	n.mustUnpublish(t, pod, "secrets")
}

// selfWriter is a provider in the legacy mode of the provider contract, as
// the existing AWS provider is by default: it writes the files into the
// target itself (a temporary file renamed over the name) and returns none.
type selfWriter struct {
	mu    sync.Mutex
	value string
	rev   int
}

func (p *selfWriter) set(value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.value = value
	p.rev++
}

func (p *selfWriter) Mount(_ context.Context, req *server.MountRequest) (*server.MountResult, error) {
	p.mu.Lock()
	value, rev := p.value, p.rev
	p.mu.Unlock()
	tmp, err := os.CreateTemp(req.TargetPath, ".password-")
	if err != nil {
		return nil, err
	}
	if _, err := tmp.WriteString(value); err != nil {
		return nil, err
	}
	if err := errors.Join(tmp.Chmod(0o644), tmp.Close()); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(req.TargetPath, "password")); err != nil {
		return nil, err
	}
	return &server.MountResult{Versions: []server.ObjectVersion{{ID: "db/password", Version: strconv.Itoa(rev)}}}, nil
}

// serveProvider serves p as provider name in the node's provider directory
// until the test ends.
func serveProvider(t *testing.T, n *node, name string, p server.Provider) {
	t.Helper()
	ctrltest.ServeProvider(t, n.providerDir, name, p)
}

// TestProviderWritingItsOwnFiles: with a provider that writes the files
// itself, the pod sees them read-only, the versions are in the pod status,
// secretObjects are synced from those files, and a republish carries a
// change to the files, the status and the Secret.
func TestProviderWritingItsOwnFiles(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	p := &selfWriter{}
	v1, v2 := "v1-"+randomHex(6), "v2-"+randomHex(6)
	n.forbid(v1, "the first value a legacy provider wrote")
	n.forbid(v2, "the second value a legacy provider wrote")
	p.set(v1)
	serveProvider(t, n, "selfwriter", p)
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy"},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider: "selfwriter",
			SecretObjects: []*secretsstorev1.SecretObject{{
				SecretName: "legacy-db", Type: string(corev1.SecretTypeOpaque),
				Data: []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}},
			}},
		},
	}
	createObject(t, n.s.ctrl, spc)
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "legacy"})
	n.mustPublish(t, pod, "secrets")
	target := n.targetPath(pod, "secrets")
	if got := readFile(t, target, "password"); got != v1 {
		t.Errorf("password = %q, want the first value", got)
	}
	if err := os.WriteFile(filepath.Join(target, "planted"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("writing into the published volume: %v, want EROFS", err)
	}
	n.s.waitForStatus(t, pod, "legacy", objectVersions(map[string]string{"db/password": "1"}))
	n.s.waitForSecret(t, ns, "legacy-db", hasData(map[string][]byte{"password": []byte(v1)}))

	p.set(v2)
	n.mustPublish(t, pod, "secrets")
	if got := readFile(t, target, "password"); got != v2 {
		t.Errorf("password after the republish = %q, want the second value", got)
	}
	n.s.waitForStatus(t, pod, "legacy", objectVersions(map[string]string{"db/password": "2"}))
	n.s.waitForSecret(t, ns, "legacy-db", hasData(map[string][]byte{"password": []byte(v2)}))
	n.mustUnpublish(t, pod, "secrets")
}

// objectVersions accepts a pod status listing exactly these object versions.
func objectVersions(want map[string]string) statusCheck {
	return func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		got := map[string]string{}
		for _, o := range st.Status.Objects {
			got[o.ID] = o.Version
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("objects %v, want %v", got, want)
		}
		return nil
	}
}

// TestAdoptVolumeOfUpstreamDriver: a volume the upstream driver published
// before the switch (a tmpfs at the target in upstream's ..data layout, and
// upstream's pod status) is adopted by keymount's first republish: a
// process that entered the old mount sees the new files, the pod status
// goes on, the Secret is synced, and unpublish unmounts it.
func TestAdoptVolumeOfUpstreamDriver(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	newValue := []byte("new-" + randomHex(6))
	n.writeObject(t, "adopt/password", newValue)
	spc := n.createClass(t, ns, "adopt", "local", []object{{name: "adopt/password", alias: "password"}},
		&secretsstorev1.SecretObject{
			SecretName: "adopted-db", Type: string(corev1.SecretTypeOpaque),
			Data: []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}},
		})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "adopt"})
	target := n.targetPath(pod, "secrets")

	// What the upstream driver left: its tmpfs and files, and its status.
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", target, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	gen := "..2026_11_01_08_00_00.2718281828"
	for _, step := range []error{
		os.Mkdir(filepath.Join(target, gen), 0o755),
		os.WriteFile(filepath.Join(target, gen, "password"), []byte("old"), 0o644),
		os.Symlink(gen, filepath.Join(target, "..data")),
		os.Symlink("..data/password", filepath.Join(target, "password")),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	upstreamStatus := &secretsstorev1.SecretProviderClassPodStatus{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: statusName(pod, "adopt"),
			Labels:          map[string]string{secretsstorev1.InternalNodeLabel: n.name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Status: secretsstorev1.SecretProviderClassPodStatusStatus{
			PodName: pod.Name, SecretProviderClassName: "adopt", Mounted: true, TargetPath: target,
			Objects: []secretsstorev1.SecretProviderClassObject{{ID: "adopt/password", Version: "old"}},
		},
	}
	createObject(t, n.s.ctrl, upstreamStatus)

	// A process of the running container: it entered the old mount.
	held, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	heldFile := filepath.Join("/proc/self/fd", strconv.Itoa(int(held.Fd())), "password")

	n.mustPublish(t, pod, "secrets")
	if data, err := os.ReadFile(heldFile); err != nil || string(data) != string(newValue) {
		t.Errorf("what the running container sees after the republish: %q, %v; want the new value", data, err)
	}
	n.checkPodStatus(t, pod, wantStatus{volume: "secrets", class: spc, synced: metav1.ConditionTrue,
		objects: map[string][]byte{"adopt/password": newValue}})
	n.s.waitForSecret(t, ns, "adopted-db", hasData(map[string][]byte{"password": newValue}))

	n.mustUnpublish(t, pod, "secrets")
	n.checkNothingMounted(t, pod, "secrets")
}

// TestRollbackToUpstreamUnpublishes: after a switch back to the upstream
// driver, it unpublishes keymount's volumes its own way (unmount the target
// and remove the directory), and keymount, when it returns, removes the
// tmpfs no target shows any more.
func TestRollbackToUpstreamUnpublishes(t *testing.T) {
	n := startNode(t, nodeOptions{})
	ns := n.newNamespace(t)
	n.writeObject(t, "rollback/key", []byte("rb-"+randomHex(6)))
	n.createClass(t, ns, "rollback", "local", []object{{name: "rollback/key", alias: "key"}})
	pod := n.createPod(t, ns, "app", secretsVolume{name: "secrets", class: "rollback"})
	n.mustPublish(t, pod, "secrets")
	target := n.targetPath(pod, "secrets")

	// The upstream driver's NodeUnpublishVolume: unmount, remove the directory.
	if err := unix.Unmount(target, 0); err != nil {
		t.Fatalf("upstream-style unmount of a keymount volume: %v", err)
	}
	if err := os.Remove(target); err != nil {
		t.Fatalf("upstream-style removal of the target: %v", err)
	}
	// keymount returns: the start-up clean-up drops the orphaned tmpfs.
	n.restartDriver(t)
	n.checkNothingMounted(t, pod, "secrets")
}
