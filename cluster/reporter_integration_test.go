//go:build integration

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster"
	"github.com/keymount/keymount/cluster/podstatus"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/harness"
	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

const (
	outageNode = "node-outage"
	// plainClass mounts the object "password"; syncedClass also mirrors it
	// into the Secret syncedSecret.
	plainClass   = "plain"
	syncedClass  = "synced"
	syncedSecret = "synced-password"
	// kubeletDeadline is what kubelet gives one CSI call: a call that waits
	// for the stopped API server fails the test instead of hanging it.
	kubeletDeadline = 2 * time.Minute
	// afterReturn bounds how long the driver may take to write, once the
	// API server is back, what it could not write while it was stopped (its
	// retries back off up to a minute): a bound, not a target.
	afterReturn = 2 * time.Minute
)

// classVolume is a pod's volume and the class it is published with.
type classVolume struct {
	harness.Volume
	class string
}

func (v classVolume) String() string { return v.Name + " (" + v.statusName() + ")" }

// statusName is the name of the volume's SecretProviderClassPodStatus.
func (v classVolume) statusName() string {
	return podstatus.Name(v.Pod.Name, v.Pod.Namespace, v.class)
}

// TestWritesSurviveAPIServerOutage proves that the API server is not on
// kubelet's path and that nothing the driver has to write is lost while it
// is away: with kube-apiserver stopped, new volumes are published and
// published volumes unpublished, every call succeeds, and once it answers
// again the new volumes' pod statuses are written, the unpublished ones'
// are removed (also that of a volume published and unpublished during the
// outage, whose status was never written), the others' are still there,
// and the Secret a class syncs holds the content published during the
// outage.
func TestWritesSurviveAPIServerOutage(t *testing.T) {
	// Own control plane: the test stops and starts the API server.
	env := k8senv.Start(t, k8senv.Options{CRDDirectoryPaths: []string{"../deploy/crds"}})
	api := newAPIClient(t, env)
	// kube-apiserver creates "default" in the background: do not race it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceDefault}}
	if err := api.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// Created before the driver starts, so its first cache list has them
	// and no publish needs the API server to find its class.
	createClass(t, api, plainClass, nil)
	createClass(t, api, syncedClass, []*secretsstorev1.SecretObject{{
		SecretName: syncedSecret, Type: string(corev1.SecretTypeOpaque),
		Data: []*secretsstorev1.SecretObjectData{{ObjectName: "password", Key: "password"}},
	}})
	h, cl := startNodeWithCluster(t, env)
	h.WriteObject("password", "v1")
	poll.UntilTrue(t, "the caches to sync", cl.Synced)

	newVolume := func(name, class string) classVolume { return classVolume{Volume: h.NewVolume(name), class: class} }
	kept := []classVolume{newVolume("kept-0", plainClass), newVolume("kept-1", plainClass), newVolume("kept-synced", syncedClass)}
	removed := []classVolume{newVolume("removed-0", plainClass), newVolume("removed-1", plainClass)}
	for _, v := range slices.Concat(kept, removed) {
		publishOK(t, h, v)
	}
	waitWritten(t, api, slices.Concat(kept, removed), nil, "v1")

	env.StopAPIServer(t)
	h.WriteObject("password", "v2")
	added := []classVolume{
		newVolume("added-0", plainClass), newVolume("added-1", plainClass), newVolume("added-2", plainClass),
		newVolume("added-synced", syncedClass),
	}
	for _, v := range added {
		publishOK(t, h, v)
	}
	for _, v := range removed {
		unpublishOK(t, h, v)
	}
	transient := newVolume("transient", plainClass)
	publishOK(t, h, transient)
	unpublishOK(t, h, transient)
	// The pods have their files while the API server is away; nothing of
	// theirs can have reached it.
	for _, v := range added {
		if got, err := os.ReadFile(filepath.Join(v.Target, "password")); err != nil || string(got) != "v2" {
			t.Errorf("%s shows password %q (%v), want v2", v, got, err)
		}
	}
	if err := api.Get(t.Context(), client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: syncedSecret}, &corev1.Secret{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("reading from the stopped API server: err = %v, want connection refused", err)
	}
	env.StartAPIServer(t)

	waitWritten(t, api, slices.Concat(kept, added), slices.Concat(removed, []classVolume{transient}), "v2")
}

// startNodeWithCluster starts a harness node whose driver reports to env's
// API server and resolves classes from it, and returns its cluster side.
func startNodeWithCluster(t *testing.T, env *k8senv.Env) (*harness.Harness, *cluster.Cluster) {
	t.Helper()
	var cl *cluster.Cluster
	h := harness.Start(t, harness.Options{
		NodeID: outageNode,
		Cluster: func(ctx context.Context) (driver.Cluster, class.Resolver, error) {
			c, err := cluster.Start(ctx, cluster.Config{
				Rest: restConfig(env), Node: outageNode, DriverName: driver.DefaultDriverName, SyncSecrets: true,
			})
			if err != nil {
				return nil, nil, err
			}
			cl = c
			return c, c.Resolver(), nil
		},
	})
	return h, cl
}

// waitWritten waits until the API server has a pod status for each volume
// of exist, naming its pod and target, none for a volume of gone, and
// syncedSecret holds password.
func waitWritten(t *testing.T, api client.Client, exist, gone []classVolume, password string) {
	t.Helper()
	var problems []string
	err := poll.Wait(t.Context(), afterReturn, func(ctx context.Context) (bool, error) {
		problems = nil
		for _, v := range exist {
			if p := checkStatus(ctx, api, v); p != "" {
				problems = append(problems, p)
			}
		}
		for _, v := range gone {
			if p := checkGone(ctx, api, v); p != "" {
				problems = append(problems, p)
			}
		}
		if p := checkSecret(ctx, api, password); p != "" {
			problems = append(problems, p)
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Fatalf("the API server did not get what the driver had to write within %s:\n%s", afterReturn, strings.Join(problems, "\n"))
	}
}

// checkStatus returns what is wrong with v's pod status, "" for nothing.
func checkStatus(ctx context.Context, api client.Client, v classVolume) string {
	st := &secretsstorev1.SecretProviderClassPodStatus{}
	if err := api.Get(ctx, client.ObjectKey{Namespace: v.Pod.Namespace, Name: v.statusName()}, st); err != nil {
		return fmt.Sprintf("%s: pod status: %v", v, err)
	}
	if st.Status.PodName != v.Pod.Name || st.Status.TargetPath != v.Target || !st.Status.Mounted {
		return fmt.Sprintf("%s: pod status says pod %q, target %q, mounted %t; want %q, %q, true",
			v, st.Status.PodName, st.Status.TargetPath, st.Status.Mounted, v.Pod.Name, v.Target)
	}
	if v.class == syncedClass && !meta.IsStatusConditionTrue(st.Status.Conditions, secretsstorev1.ConditionSecretsSynced) {
		return fmt.Sprintf("%s: pod status conditions %v, want %s true", v, st.Status.Conditions, secretsstorev1.ConditionSecretsSynced)
	}
	return ""
}

// checkGone returns "" once v's pod status does not exist.
func checkGone(ctx context.Context, api client.Client, v classVolume) string {
	st := &secretsstorev1.SecretProviderClassPodStatus{}
	err := api.Get(ctx, client.ObjectKey{Namespace: v.Pod.Namespace, Name: v.statusName()}, st)
	switch {
	case apierrors.IsNotFound(err):
		return ""
	case err != nil:
		return fmt.Sprintf("%s: pod status: %v", v, err)
	}
	return fmt.Sprintf("%s: unpublished, but its pod status is still there", v)
}

// checkSecret returns "" once syncedSecret holds password.
func checkSecret(ctx context.Context, api client.Client, password string) string {
	s := &corev1.Secret{}
	if err := api.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: syncedSecret}, s); err != nil {
		return fmt.Sprintf("Secret %s: %v", syncedSecret, err)
	}
	if got := string(s.Data["password"]); got != password {
		return fmt.Sprintf("Secret %s holds password %q, want %q", syncedSecret, got, password)
	}
	return ""
}

func publishOK(t *testing.T, h *harness.Harness, v classVolume) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), kubeletDeadline)
	defer cancel()
	if err := h.Publish(ctx, v.Volume, v.class, true); err != nil {
		t.Fatalf("NodePublishVolume(%s): %v", v, err)
	}
}

func unpublishOK(t *testing.T, h *harness.Harness, v classVolume) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), kubeletDeadline)
	defer cancel()
	if err := h.Unpublish(ctx, v.Volume); err != nil {
		t.Fatalf("NodeUnpublishVolume(%s): %v", v, err)
	}
}

// createClass creates a class of the harness's local provider in the
// harness's namespace, mounting the object "password".
func createClass(t *testing.T, api client.Client, name string, secretObjects []*secretsstorev1.SecretObject) {
	t.Helper()
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: name},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider:      harness.ProviderName,
			Parameters:    map[string]string{"objects": harness.ObjectsYAML("password")},
			SecretObjects: secretObjects,
		},
	}
	if err := api.Create(t.Context(), spc); err != nil {
		t.Fatalf("creating SecretProviderClass %s: %v", name, err)
	}
}

// restConfig is env's administrator, without client-side throttling.
func restConfig(env *k8senv.Env) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

func newAPIClient(t *testing.T, env *k8senv.Env) client.Client {
	t.Helper()
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(restConfig(env), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
