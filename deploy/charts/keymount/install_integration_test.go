//go:build integration

package keymount_test

import (
	"context"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
)

// helmConfig is Helm's action configuration for the test control plane, as
// the helm CLI builds it from a kubeconfig (releases stored in Secrets).
func helmConfig(t *testing.T, env *k8senv.Env) *action.Configuration {
	t.Helper()
	kubeconfig, _ := env.KubeconfigFor(t, "helm", []string{"system:masters"})
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := namespace
	flags.Namespace = &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, namespace, "secret", t.Logf); err != nil {
		t.Fatalf("helm: %v", err)
	}
	return cfg
}

// applyKustomize applies the kustomize base with components as
// `kubectl apply --server-side -k` does (field manager kubectl).
func applyKustomize(ctx context.Context, t *testing.T, a *applier, components ...string) {
	t.Helper()
	for _, obj := range kustomize(t, "", components...).objects {
		if err := a.apply(ctx, obj, "kubectl", false); err != nil {
			t.Fatalf("kubectl apply -k deploy/: %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// TestHelmAdoptsUpgradesUninstalls runs Helm's own install, upgrade and
// uninstall (the SDK behind the helm CLI) against a real kube-apiserver:
// `helm install --take-ownership` adopts a cluster deployed with
// `kubectl apply -k deploy/` in place (same names, same immutable
// selectors), an upgrade turning on secret sync adds its RBAC and flag, and
// an uninstall removes everything but the CRDs (SecretProviderClasses
// survive it). A fresh install with upstream's values follows.
func TestHelmAdoptsUpgradesUninstalls(t *testing.T) {
	// Own control plane: helm installs, upgrades and uninstalls the chart's cluster-scoped objects (CRDs, ClusterRoles, the CSIDriver with its immutable spec) and asserts on them.
	env := k8senv.Start(t, k8senv.Options{})
	ctx := t.Context()
	client := kubernetes.NewForConfigOrDie(env.Config)
	ensureNamespace(ctx, t, client)
	a := newApplier(t, env)
	applyKustomize(ctx, t, a)
	cfg := helmConfig(t, env)
	ch := loadChart(t)

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.TakeOwnership = releaseName, namespace, true
	if _, err := install.RunWithContext(ctx, ch, map[string]any{}); err != nil {
		t.Fatalf("helm install --take-ownership over kubectl apply -k deploy/: %v", err)
	}
	ds, err := client.AppsV1().DaemonSets(namespace).Get(ctx, releaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Labels["app.kubernetes.io/managed-by"] != "Helm" || ds.Annotations["meta.helm.sh/release-name"] != releaseName {
		t.Errorf("the DaemonSet was not adopted: labels %v, annotations %v", ds.Labels, ds.Annotations)
	}

	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = namespace
	if _, err := upgrade.RunWithContext(ctx, releaseName, ch, map[string]any{"syncSecret": map[string]any{"enabled": true}}); err != nil {
		t.Fatalf("helm upgrade --set syncSecret.enabled=true: %v", err)
	}
	if _, err := client.RbacV1().ClusterRoles().Get(ctx, releaseName+"-secret-sync", metav1.GetOptions{}); err != nil {
		t.Errorf("after the upgrade: %v", err)
	}
	if ds := getDaemonSet(ctx, t, client); !hasArg(ds.Spec.Template.Spec.Containers[0].Args, "--sync-secrets=true") {
		t.Errorf("after the upgrade the driver's args are %q", ds.Spec.Template.Spec.Containers[0].Args)
	}

	uninstall := action.NewUninstall(cfg)
	if _, err := uninstall.Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	checkUninstalled(ctx, t, client, a)

	install = action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "csi-secrets-store", namespace
	if _, err := install.RunWithContext(ctx, ch, merge(readValues(t, upstreamValues))); err != nil {
		t.Fatalf("helm install with upstream's values: %v", err)
	}
	if _, err := client.AppsV1().DaemonSets(namespace).Get(ctx, "csi-secrets-store-keymount", metav1.GetOptions{}); err != nil {
		t.Errorf("helm install with upstream's values: %v", err)
	}
}

func getDaemonSet(ctx context.Context, t *testing.T, client kubernetes.Interface) *appsv1.DaemonSet {
	t.Helper()
	ds, err := client.AppsV1().DaemonSets(namespace).Get(ctx, releaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// checkUninstalled: the driver's objects are gone, the CRDs stay.
func checkUninstalled(ctx context.Context, t *testing.T, client kubernetes.Interface, a *applier) {
	t.Helper()
	gone := map[string]error{}
	_, gone["DaemonSet"] = client.AppsV1().DaemonSets(namespace).Get(ctx, releaseName, metav1.GetOptions{})
	_, gone["CSIDriver"] = client.StorageV1().CSIDrivers().Get(ctx, "secrets-store.csi.k8s.io", metav1.GetOptions{})
	_, gone["ClusterRole"] = client.RbacV1().ClusterRoles().Get(ctx, releaseName, metav1.GetOptions{})
	_, gone["secret-sync ClusterRole"] = client.RbacV1().ClusterRoles().Get(ctx, releaseName+"-secret-sync", metav1.GetOptions{})
	_, gone["ServiceAccount"] = client.CoreV1().ServiceAccounts(namespace).Get(ctx, releaseName, metav1.GetOptions{})
	for what, err := range gone {
		if !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall the %s: %v, want NotFound", what, err)
		}
	}
	crds := a.crdNames(ctx, t)
	for _, want := range []string{"secretproviderclasses.secrets-store.csi.x-k8s.io", "secretproviderclasspodstatuses.secrets-store.csi.x-k8s.io"} {
		if !slices.Contains(crds, want) {
			t.Errorf("helm uninstall deleted the CRD %s (and every object of it)", want)
		}
	}
}
