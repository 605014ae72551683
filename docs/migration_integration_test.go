//go:build integration

package docs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// guideCharts maps the charts the guide's helm commands name to their
// directories: keymount's own, and the stand-in for upstream's.
var guideCharts = map[string]string{
	"deploy/charts/keymount":                            "../deploy/charts/keymount",
	"secrets-store-csi-driver/secrets-store-csi-driver": "testdata/upstream-chart",
}

var (
	spcps = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}
	spcs  = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasses"}
)

// shBlock is a ```sh block of a Markdown page.
var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// guideCommands returns the commands of the sh blocks of the guide's
// "Switching, step by step" and "Rolling back" sections, in order.
func guideCommands(t *testing.T) (switching, rollback []string) {
	t.Helper()
	page := readDoc(t, "migrating-from-upstream.md")
	sw, rb := strings.Index(page, "## Switching, step by step"), strings.Index(page, "## Rolling back")
	if sw < 0 || rb < sw {
		t.Fatal("migrating-from-upstream.md lacks its Switching and Rolling back sections")
	}
	cmds := func(text string) []string {
		var out []string
		for _, b := range shBlock.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(b[1], "\n") {
				if line = strings.TrimSpace(line); line != "" {
					out = append(out, line)
				}
			}
		}
		return out
	}
	end := len(page)
	if next := strings.Index(page[rb+3:], "\n## "); next >= 0 {
		end = rb + 3 + next
	}
	return cmds(page[sw:rb]), cmds(page[rb:end])
}

// guideRunner runs the guide's commands against a control plane: helm
// through the Helm SDK, kubectl through client-go.
type guideRunner struct {
	t    *testing.T
	env  *k8senv.Env
	dir  string // where redirected output goes
	helm *action.Configuration
	core kubernetes.Interface
	dyn  dynamic.Interface
}

func (g *guideRunner) run(cmd string) { //nolint:gocyclo // one case per kind of command the guide holds
	g.t.Helper()
	args, out, _ := strings.Cut(cmd, ">")
	f := strings.Fields(args)
	var err error
	switch {
	case len(f) >= 3 && f[0] == "kubectl" && f[1] == "get":
		_, err = g.dyn.Resource(schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: f[2]}).List(g.t.Context(), metav1.ListOptions{})
	case len(f) >= 4 && f[0] == "kubectl" && f[1] == "delete" && f[2] == "csidriver":
		err = g.core.StorageV1().CSIDrivers().Delete(g.t.Context(), f[3], metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) && strings.Contains(args, "--ignore-not-found") {
			err = nil
		}
	case len(f) >= 2 && f[0] == "kubectl" && f[1] == "apply" && flagValue(f, "-f") != "":
		err = g.applyDir(filepath.Join("..", flagValue(f, "-f")))
	case len(f) >= 4 && f[0] == "helm" && f[1] == "get" && f[2] == "values":
		var vals map[string]any
		if vals, err = action.NewGetValues(g.helm).Run(f[3]); err == nil {
			err = writeYAML(filepath.Join(g.dir, strings.TrimSpace(out)), vals)
		}
	case len(f) >= 3 && f[0] == "helm" && f[1] == "uninstall":
		_, err = action.NewUninstall(g.helm).Run(f[2])
	case len(f) >= 4 && f[0] == "helm" && f[1] == "install":
		err = g.install(f[2], f[3], flagValue(f, "-f"))
	default:
		g.t.Fatalf("the guide's command %q is not one TestMigrationGuide can run: teach guideRunner.run", cmd)
	}
	if err != nil {
		g.t.Fatalf("%s: %v", cmd, err)
	}
}

func flagValue(f []string, name string) string {
	for i := range len(f) - 1 {
		if f[i] == name {
			return f[i+1]
		}
	}
	return ""
}

func writeYAML(path string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

func (g *guideRunner) applyDir(dir string) error {
	a, err := g.env.NewApplier()
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no YAML in %s: %w", dir, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return err
		}
		if err := a.Apply(g.t.Context(), obj, "kubectl", "", false); err != nil {
			return err
		}
	}
	return nil
}

func (g *guideRunner) install(release, chartRef, valuesFile string) error {
	dir, ok := guideCharts[chartRef]
	if !ok {
		g.t.Fatalf("the guide installs chart %q, which TestMigrationGuide does not know", chartRef)
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return err
	}
	vals := map[string]any{}
	if valuesFile != "" {
		b, err := os.ReadFile(filepath.Join(g.dir, valuesFile))
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(b, &vals); err != nil {
			return err
		}
	}
	in := action.NewInstall(g.helm)
	in.ReleaseName, in.Namespace = release, "kube-system"
	_, err = in.RunWithContext(g.t.Context(), ch, vals)
	return err
}

// TestMigrationGuide follows docs/migrating-from-upstream.md literally on a
// real kube-apiserver: from an upstream chart release (a stand-in built
// from upstream's facts, testdata/upstream-chart) with a class and a pod
// status, through every command of "Switching, step by step" (Helm SDK for
// helm, client-go for kubectl) to keymount's release, and back through
// "Rolling back". It checks what the guide promises on the way: the classes
// survive, keymount's status fields are pruned before the CRD step and
// kept after it, and each release is in place at its end.
func TestMigrationGuide(t *testing.T) {
	switching, rollback := guideCommands(t)
	if len(switching) < 5 || len(rollback) < 2 {
		t.Fatalf("found %d switching and %d rollback commands: is the parsing broken?", len(switching), len(rollback))
	}
	// Own control plane: the guide replaces the upstream CRDs with keymount's, cluster-scoped.
	env := k8senv.Start(t, k8senv.Options{})
	g := newGuideRunner(t, env)
	ctx := t.Context()

	// Before: upstream's release, with values of its own, a class and a pod status.
	if err := g.installWith("csi-secrets-store", "secrets-store-csi-driver/secrets-store-csi-driver",
		map[string]any{"syncSecret": map[string]any{"enabled": true}}); err != nil {
		t.Fatalf("install the upstream chart: %v", err)
	}
	createObject(t, g.dyn, spcs, `{"apiVersion":"secrets-store.csi.x-k8s.io/v1","kind":"SecretProviderClass","metadata":{"name":"db","namespace":"default"},"spec":{"provider":"aws","parameters":{"objects":"- objectName: db"}}}`)
	createObject(t, g.dyn, spcps, `{"apiVersion":"secrets-store.csi.x-k8s.io/v1","kind":"SecretProviderClassPodStatus","metadata":{"name":"app-default-db","namespace":"default"},"status":{"mounted":true,"podName":"app","secretProviderClassName":"db","targetPath":"/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/db/mount","objects":[{"id":"db","version":"1"}]}}`)

	for _, cmd := range switching {
		crdStep := strings.HasPrefix(cmd, "kubectl apply") && strings.Contains(cmd, "crds")
		if crdStep && keepsConditions(t, g.dyn) {
			t.Error("before the CRD step, upstream's schema kept keymount's status conditions: the guide's warning would be wrong")
		}
		g.run(cmd)
		// The API server serves an updated CRD's schema a moment after the
		// apply returns: wait for it, a generous deadline failing only a
		// schema that never keeps them.
		if crdStep && poll.Wait(ctx, poll.Deadline, func(context.Context) (bool, error) { return keepsConditions(t, g.dyn), nil }) != nil {
			t.Error("after the guide's CRD step, the API server still prunes keymount's status conditions")
		}
	}
	checkRelease(t, g, "keymount")
	if _, err := g.core.StorageV1().CSIDrivers().Get(ctx, "secrets-store.csi.k8s.io", metav1.GetOptions{}); err != nil {
		t.Errorf("after the switch, keymount's CSIDriver: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(g.dir, "upstream-values.yaml")); err != nil || !strings.Contains(string(b), "syncSecret") {
		t.Errorf("the guide's saved upstream values: %q, %v; want the release's syncSecret", b, err)
	}

	for _, cmd := range rollback {
		g.run(cmd)
	}
	checkRelease(t, g, "csi-secrets-store")
	if _, err := g.core.AppsV1().DaemonSets("kube-system").Get(ctx, "csi-secrets-store-secrets-store-csi-driver", metav1.GetOptions{}); err != nil {
		t.Errorf("after the rollback, upstream's DaemonSet: %v", err)
	}
	if _, err := g.dyn.Resource(spcs).Namespace("default").Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Errorf("the class did not survive the switch and the rollback: %v", err)
	}
}

func newGuideRunner(t *testing.T, env *k8senv.Env) *guideRunner {
	t.Helper()
	kubeconfig, _ := env.KubeconfigFor(t, "helm", []string{"system:masters"})
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := "kube-system"
	flags.Namespace = &ns
	cfg := &action.Configuration{}
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatalf("helm: %v", err)
	}
	return &guideRunner{t: t, env: env, dir: t.TempDir(), helm: cfg,
		core: kubernetes.NewForConfigOrDie(env.Config), dyn: dynamic.NewForConfigOrDie(env.Config)}
}

func createObject(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, manifest string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(manifest)); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// keepsConditions writes keymount's conditions into the pod status, as the
// driver does, and reports whether the API server stored them.
func keepsConditions(t *testing.T, dyn dynamic.Interface) bool {
	t.Helper()
	ri := dyn.Resource(spcps).Namespace("default")
	obj, err := ri.Get(t.Context(), "app-default-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := map[string]any{"type": "Current", "status": "True", "reason": "Refreshed", "message": "refreshed",
		"lastTransitionTime": "2026-11-28T00:00:00Z"}
	if err := unstructured.SetNestedSlice(obj.Object, []any{cond}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	got, err := ri.Update(t.Context(), obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("write the pod status: %v", err)
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	return len(conds) == 1
}

func (g *guideRunner) installWith(release, chartRef string, vals map[string]any) error {
	file := release + "-initial-values.yaml"
	if err := writeYAML(filepath.Join(g.dir, file), vals); err != nil {
		return err
	}
	return g.install(release, chartRef, file)
}

// checkRelease fails unless release is deployed.
func checkRelease(t *testing.T, g *guideRunner, release string) {
	t.Helper()
	rel, err := action.NewStatus(g.helm).Run(release)
	if err != nil {
		t.Errorf("helm status %s: %v", release, err)
		return
	}
	if st := rel.Info.Status.String(); st != "deployed" {
		t.Errorf("helm status %s: %s, want deployed", release, st)
	}
}
