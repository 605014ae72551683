//go:build integration

package convert_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/internal/satoken"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/aws"
	"github.com/keymount/keymount/provider/aws/identity"
	"github.com/keymount/keymount/provider/aws/kubeclient"
	"github.com/keymount/keymount/provider/aws/noderegion"
	"github.com/keymount/keymount/provider/aws/store"
	"github.com/keymount/keymount/tests/ctrltest"
	"github.com/keymount/keymount/tests/k8senv"
)

const (
	// stsAudience is the audience of the IRSA token the controller mints.
	stsAudience = "sts.amazonaws.com"
	// roleARN is the IRSA role of the ServiceAccount (moto accepts any).
	roleARN      = "arn:aws:iam::123456789012:role/app"
	controllerNS = "keymount-system"
)

// cluster is a real API server with keymount's CRDs, keymount's AWS
// provider (the code keymount-provider-aws runs) on a unix socket against
// moto_server, and keymount-controller's SecretSync reconciler against both.
type cluster struct {
	cs  kubernetes.Interface
	c   client.Client // uncached
	cfg *rest.Config
}

// startCluster starts the cluster; the AWS provider reads from endpoint in
// region and proves identities with IRSA at moto's STS.
func startCluster(t *testing.T, endpoint, region string) *cluster {
	t.Helper()
	return startClusterWith(t, endpoint, region, time.Minute)
}

// startClusterWith is startCluster whose AWS provider remembers a
// ServiceAccount's role for saTTL (keymount-provider-aws: a minute).
func startClusterWith(t *testing.T, endpoint, region string, saTTL time.Duration) *cluster {
	t.Helper()
	cl, _ := startControllerCluster(t, stsAudience, k8senv.Options{}, func(env *k8senv.Env, dir string) {
		serveAWS(t, env, dir, endpoint, region, saTTL)
	})
	return cl
}

// startControllerCluster starts a real API server with keymount's CRDs,
// the providers serve puts into the socket directory it is given, and
// keymount-controller's SecretSync reconciler, which requests tokens for
// audience; opts add to the control plane (keymount's CRDs are always
// there).
func startControllerCluster(t *testing.T, audience string, opts k8senv.Options, serve func(env *k8senv.Env, dir string)) (*cluster, *k8senv.Env) {
	t.Helper()
	ctrl.SetLogger(klog.Background())
	// Own control plane: each test of the package starts its own
	// controller and provider, watching every namespace.
	opts.CRDDirectoryPaths = append(opts.CRDDirectoryPaths, "../../../../deploy/crds")
	env := k8senv.Start(t, opts)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{cs: kubernetes.NewForConfigOrDie(env.Config), cfg: env.Config}
	if cl.c, err = client.New(env.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	sockDir := sockettest.Dir(t)
	serve(env, sockDir)
	cl.namespace(t, controllerNS)

	cfg := secretsync.Config{Audiences: []string{audience}, PollInterval: time.Hour}
	cfg.Pod.Name, cfg.Pod.Namespace, cfg.Pod.UID = "keymount-controller-0", controllerNS, "0000-convert"
	ctrltest.SyncController{Config: cfg, SocketDir: sockDir, Workers: 2}.Start(t, env.Config, scheme)
	return cl, env
}

// serveAWS serves keymount's AWS provider, wired as keymount-provider-aws
// wires it, as provider "aws" in dir until the test ends.
func serveAWS(t *testing.T, env *k8senv.Env, dir, endpoint, region string, saTTL time.Duration) {
	t.Helper()
	kc, err := kubeclient.ForConfig(env.Config, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Config{Endpoint: endpoint})
	ids := identity.New(identity.Config{STSEndpoint: endpoint, Outages: st}, identity.NewKubeServiceAccounts(kc, saTTL))
	verifier, err := satoken.New(satoken.Config{}, kc)
	if err != nil {
		t.Fatal(err)
	}
	p, err := aws.New(noderegion.New(noderegion.Config{Region: region}, kc), verifier, ids, st)
	if err != nil {
		t.Fatal(err)
	}
	ctrltest.ServeProvider(t, dir, "aws", p)
}

func (cl *cluster) namespace(t *testing.T, name string) {
	t.Helper()
	if err := cl.c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// irsaServiceAccount creates a ServiceAccount with an IRSA role.
func (cl *cluster) irsaServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{"eks.amazonaws.com/role-arn": roleARN}}}
	if err := cl.c.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
}
