//go:build integration

package secretobjects

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/internal/atomicwrite"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/k8senv"
)

const driverName = "secrets-store.csi.k8s.io"

// cluster is the control plane the integration tests share.
type cluster struct {
	env    *k8senv.Env
	cfg    *rest.Config
	scheme *runtime.Scheme
	admin  client.Client
	// api is the administrator through the driver's own client.
	api kube.Client
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	// Own control plane: the package's only one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../../deploy/crds"}, ControllerManager: true})
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := secretsstorev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	api, err := kube.NewAPI(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{env: env, cfg: env.Config, scheme: scheme, admin: admin, api: api}
}

// namespace creates a namespace for one test.
func (cl *cluster) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sync-"}}
	if err := cl.admin.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// testNode is one node's Syncer with what it wrote and told.
type testNode struct {
	name   string
	syncer *Syncer
	writes *countingClient
	events *eventLog
}

// node returns a Syncer for a node, as an administrator. It reads through
// the live client, like a cache that is always current, unless reader is
// given.
func (cl *cluster) node(name string, reader kube.Reader) *testNode {
	return cl.nodeAs(cl.api, name, reader)
}

// nodeAs returns a Syncer for a node that writes with c.
func (cl *cluster) nodeAs(c kube.Client, name string, reader kube.Reader) *testNode {
	n := &testNode{name: name, writes: &countingClient{Client: c}, events: &eventLog{}}
	if reader == nil {
		reader = c
	}
	n.syncer = New(n.writes, reader, name, driverName, n.events)
	return n
}

// nodeCache starts the cache the driver runs on a node: Secrets with the
// managed label only, this node's Pods only.
func (cl *cluster) nodeCache(t *testing.T, nodeName string) *kube.Cache {
	t.Helper()
	api, err := kube.NewAPI(cl.cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewCache(api, []kube.Watch{
		{Object: &corev1.Secret{}, Labels: labels.SelectorFromSet(labels.Set{ManagedLabel: "true"})},
		{Object: &corev1.Pod{}, Fields: fields.OneTermEqualSelector("spec.nodeName", nodeName)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.Start(ctx)
	if !c.WaitForSync(t.Context()) {
		t.Fatal("cache did not sync")
	}
	return c
}

// sync runs one Sync and returns the condition; an error fails the test.
func (n *testNode) sync(t *testing.T, o *driver.Outcome) *metav1.Condition {
	t.Helper()
	c, err := n.syncer.Sync(t.Context(), o)
	if err != nil {
		t.Fatalf("Sync on %s: %v", n.name, err)
	}
	if c == nil {
		t.Fatalf("Sync on %s returned no condition", n.name)
	}
	return c
}

// class creates a SecretProviderClass.
func (cl *cluster) class(t *testing.T, ns, name string, objects ...*secretsstorev1.SecretObject) *secretsstorev1.SecretProviderClass {
	t.Helper()
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "local", SecretObjects: objects},
	}
	if err := cl.admin.Create(t.Context(), spc); err != nil {
		t.Fatal(err)
	}
	return spc
}

// pod creates a pod on nodeName with a volume of class.
func (cl *cluster) pod(t *testing.T, ns, name, nodeName, class string, finalizers ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
			Volumes: []corev1.Volume{{
				Name: "secrets",
				VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
					Driver: driverName, ReadOnly: new(true),
					VolumeAttributes: map[string]string{"secretProviderClass": class},
				}},
			}},
		},
	}
	if err := cl.admin.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// secret reads a Secret live.
func (cl *cluster) secret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := cl.admin.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		t.Fatalf("get Secret %s/%s: %v", ns, name, err)
	}
	return &s
}

// testVolume is a volume directory the way the driver fills it.
type testVolume struct{ dir string }

func newVolume(t *testing.T, files map[string]string) *testVolume {
	t.Helper()
	v := &testVolume{dir: t.TempDir()}
	v.write(t, files)
	return v
}

func (v *testVolume) write(t *testing.T, files map[string]string) {
	t.Helper()
	var fs []atomicwrite.File
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fs = append(fs, atomicwrite.File{Path: p, Contents: []byte(files[p])})
	}
	if _, err := atomicwrite.Write(v.dir, fs); err != nil {
		t.Fatal(err)
	}
}

// outcome is a successful refresh of pod's volume, the provider answering
// now.
func outcome(p *corev1.Pod, spc *secretsstorev1.SecretProviderClass, v *testVolume) *driver.Outcome {
	return &driver.Outcome{
		VolumeID: "csi-" + string(p.UID), TargetPath: v.dir, DataDir: v.dir,
		PodName: p.Name, PodNamespace: p.Namespace, PodUID: string(p.UID),
		Class: spc, Changed: true, LastRefresh: time.Now(),
	}
}

// countingClient counts the writes that go through it.
type countingClient struct {
	kube.Client
	n atomic.Int32
}

func (c *countingClient) Apply(ctx context.Context, obj kube.Object, config []byte, fieldManager string) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, config, fieldManager)
}

func (c *countingClient) Create(ctx context.Context, obj kube.Object, fieldManager string) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, fieldManager)
}

func (c *countingClient) Update(ctx context.Context, obj kube.Object) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj)
}

func (c *countingClient) Patch(ctx context.Context, obj kube.Object, pt types.PatchType, data []byte, fieldManager string) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, pt, data, fieldManager)
}

func (c *countingClient) Delete(ctx context.Context, obj kube.Object, pre *metav1.Preconditions) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, pre)
}

// take returns the number of writes since the last take.
func (c *countingClient) take() int { return int(c.n.Swap(0)) }

// eventLog records events as the pod would get them.
type eventLog struct {
	mu     sync.Mutex
	events []string // "<namespace>/<pod>/<uid> <type> <reason> <message>"
}

var _ record.EventRecorder = (*eventLog)(nil)

func (l *eventLog) Event(object runtime.Object, eventtype, reason, message string) {
	ref, ok := object.(*corev1.ObjectReference)
	who := fmt.Sprintf("%T", object)
	if ok && ref.Kind == "Pod" && ref.APIVersion == "v1" {
		who = ref.Namespace + "/" + ref.Name + "/" + string(ref.UID)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, who+" "+eventtype+" "+reason+" "+message)
}

func (l *eventLog) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	l.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (l *eventLog) AnnotatedEventf(object runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	l.Eventf(object, eventtype, reason, messageFmt, args...)
}

// take returns the events since the last take.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

// podPrefix is how eventLog names a pod.
func podPrefix(p *corev1.Pod) string {
	return p.Namespace + "/" + p.Name + "/" + string(p.UID) + " "
}

// secretOwners lists the owner reference uids of s, sorted.
func secretOwners(s *corev1.Secret) []types.UID {
	var uids []types.UID
	for _, r := range s.OwnerReferences {
		uids = append(uids, r.UID)
	}
	slices.Sort(uids)
	return uids
}
