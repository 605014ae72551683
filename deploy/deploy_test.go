// Package deploy_test renders the shipped kustomizations with kustomize's
// own library, as `kubectl apply -k` does, and checks what comes out.
package deploy_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Paths of the shipped DaemonSet, as the driver and kubelet must agree on them.
const (
	registrationFlag     = "--plugin-registration-dir="
	kubeletPathFlag      = "--kubelet-registration-path="
	pluginsRegistry      = "/var/lib/kubelet/plugins_registry"
	pluginDir            = "/var/lib/kubelet/plugins/csi-secrets-store"
	registrarName        = "node-driver-registrar"
	registrarSidecarPath = "components/registrar-sidecar"
	secretSyncPath       = "components/secret-sync"
)

// rendered is what a kustomization renders to.
type rendered struct {
	daemonSet    *appsv1.DaemonSet
	csiDriver    *storagev1.CSIDriver
	crds         map[string]*apiextensionsv1.CustomResourceDefinition
	clusterRoles map[string]*rbacv1.ClusterRole
	policies     map[string]*admissionregistrationv1.ValidatingAdmissionPolicy
	policyBinds  map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	kinds        []string
}

// deployFS copies this directory's manifests into an in-memory file system
// under /deploy, so tests can add overlays (and break things) beside it.
func deployFS(t *testing.T) filesys.FileSystem {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join("/deploy", filepath.ToSlash(p)), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// overlay writes a kustomization at /overlay using /deploy with components.
func overlay(t *testing.T, mem filesys.FileSystem, components ...string) string {
	t.Helper()
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../deploy\n"
	if len(components) > 0 {
		k += "components:\n"
		for _, c := range components {
			k += "  - ../deploy/" + c + "\n"
		}
	}
	if err := mem.WriteFile("/overlay/kustomization.yaml", []byte(k)); err != nil {
		t.Fatal(err)
	}
	return "/overlay"
}

func render(t *testing.T, mem filesys.FileSystem, dir string) (*rendered, error) {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, dir)
	if err != nil {
		return nil, err
	}
	out := &rendered{
		crds:         map[string]*apiextensionsv1.CustomResourceDefinition{},
		clusterRoles: map[string]*rbacv1.ClusterRole{},
		policies:     map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{},
		policyBinds:  map[string]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
	}
	for _, r := range m.Resources() {
		out.kinds = append(out.kinds, r.GetKind()+"/"+r.GetName())
		data, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		switch r.GetKind() {
		case "DaemonSet":
			out.daemonSet = &appsv1.DaemonSet{}
			err = yaml.UnmarshalStrict(data, out.daemonSet)
		case "CSIDriver":
			out.csiDriver = &storagev1.CSIDriver{}
			err = yaml.UnmarshalStrict(data, out.csiDriver)
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			err = yaml.UnmarshalStrict(data, crd)
			out.crds[r.GetName()] = crd
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			err = yaml.UnmarshalStrict(data, role)
			out.clusterRoles[r.GetName()] = role
		case "ValidatingAdmissionPolicy":
			p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			err = yaml.UnmarshalStrict(data, p)
			out.policies[r.GetName()] = p
		case "ValidatingAdmissionPolicyBinding":
			b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			err = yaml.UnmarshalStrict(data, b)
			out.policyBinds[r.GetName()] = b
		}
		if err != nil {
			t.Fatalf("decode %s/%s: %v", r.GetKind(), r.GetName(), err)
		}
	}
	if out.daemonSet == nil {
		t.Fatalf("%s renders no DaemonSet: %v", dir, out.kinds)
	}
	return out, nil
}

func mustRender(t *testing.T, mem filesys.FileSystem, dir string) *rendered {
	t.Helper()
	r, err := render(t, mem, dir)
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	return r
}

func (r *rendered) container(t *testing.T, name string) *corev1.Container {
	t.Helper()
	for i, c := range r.daemonSet.Spec.Template.Spec.Containers {
		if c.Name == name {
			return &r.daemonSet.Spec.Template.Spec.Containers[i]
		}
	}
	t.Fatalf("the DaemonSet has no container %s", name)
	return nil
}

func (r *rendered) containerNames() []string {
	var names []string
	for _, c := range r.daemonSet.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
	}
	return names
}

// hostPathOf returns the host path behind the volume mounted at mountPath
// in c, "" when nothing is mounted there.
func (r *rendered) hostPathOf(t *testing.T, c *corev1.Container, mountPath string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != mountPath {
			continue
		}
		for _, v := range r.daemonSet.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath.Path
			}
		}
		t.Fatalf("container %s mounts %s from volume %s, which is no hostPath", c.Name, mountPath, m.Name)
	}
	return ""
}

// flagValue returns the value of the flag with prefix in args, and whether
// it is there.
func flagValue(args []string, prefix string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			return v, true
		}
	}
	return "", false
}

// hostSocket is the host path of the CSI socket c serves or reaches through
// the flag with prefix (a container path under a hostPath mount).
func (r *rendered) hostSocket(t *testing.T, c *corev1.Container, prefix string) string {
	t.Helper()
	sock, ok := flagValue(c.Args, prefix)
	if !ok {
		t.Fatalf("container %s has no %s flag: %q", c.Name, prefix, c.Args)
	}
	sock = strings.TrimPrefix(sock, "unix://")
	host := r.hostPathOf(t, c, path.Dir(sock))
	if host == "" {
		t.Fatalf("container %s: %s is in no mounted directory", c.Name, sock)
	}
	return path.Join(host, path.Base(sock))
}

// TestDefaultRegistersBuiltIn: the default DaemonSet has no registrar
// sidecar; the driver registers itself in kubelet's plugins_registry and
// announces the host path where its CSI socket really is.
func TestDefaultRegistersBuiltIn(t *testing.T) {
	r := mustRender(t, deployFS(t), "/deploy")
	if names := r.containerNames(); !slices.Equal(names, []string{"secrets-store"}) {
		t.Fatalf("containers %v, want keymount alone", names)
	}
	c := r.container(t, "secrets-store")
	dir, ok := flagValue(c.Args, registrationFlag)
	if !ok {
		t.Fatalf("no %s in %q", registrationFlag, c.Args)
	}
	if got := r.hostPathOf(t, c, dir); got != pluginsRegistry {
		t.Errorf("%s%s is host path %q, want kubelet's %s", registrationFlag, dir, got, pluginsRegistry)
	}
	announced, ok := flagValue(c.Args, kubeletPathFlag)
	if !ok {
		t.Fatalf("no %s in %q", kubeletPathFlag, c.Args)
	}
	serving := r.hostSocket(t, c, "--endpoint=")
	if announced != serving || path.Dir(serving) != pluginDir {
		t.Errorf("announced %s, serving at %s on the host; want both in %s", announced, serving, pluginDir)
	}
	if r.daemonSet.Namespace != "kube-system" {
		t.Errorf("namespace %q, want kube-system", r.daemonSet.Namespace)
	}
}

// TestRegistrarSidecarComponent: the component puts the sidecar back and
// takes the driver's registration flags and mount away, nothing else; with
// secret-sync, in either order, both apply. The driver's token stays in the
// driver container: the sidecar gets none.
func TestRegistrarSidecarComponent(t *testing.T) {
	mem := deployFS(t)
	checkTokenInDriverAlone(t, &mustRender(t, mem, "/deploy").daemonSet.Spec.Template.Spec)
	base := mustRender(t, mem, "/deploy").container(t, "secrets-store")
	var wantArgs []string
	for _, a := range base.Args {
		if !strings.HasPrefix(a, registrationFlag) && !strings.HasPrefix(a, kubeletPathFlag) {
			wantArgs = append(wantArgs, a)
		}
	}
	tests := []struct {
		name       string
		components []string
		extraArgs  []string
	}{
		{name: "alone", components: []string{registrarSidecarPath}},
		{name: "after secret-sync", components: []string{secretSyncPath, registrarSidecarPath}, extraArgs: []string{"--sync-secrets"}},
		{name: "before secret-sync", components: []string{registrarSidecarPath, secretSyncPath}, extraArgs: []string{"--sync-secrets"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, mem, overlay(t, mem, tc.components...))
			if names := r.containerNames(); !slices.Equal(names, []string{"secrets-store", registrarName}) {
				t.Fatalf("containers %v, want keymount and %s", names, registrarName)
			}
			c := r.container(t, "secrets-store")
			if diff := cmp.Diff(append(slices.Clone(wantArgs), tc.extraArgs...), c.Args); diff != "" {
				t.Errorf("keymount args (-want +got):\n%s", diff)
			}
			for _, m := range c.VolumeMounts {
				if m.Name == "api-access" { // the projected token, no host path
					continue
				}
				if r.hostPathOf(t, c, m.MountPath) == pluginsRegistry {
					t.Errorf("keymount still mounts %s at %s", pluginsRegistry, m.MountPath)
				}
			}
			s := r.container(t, registrarName)
			if got := r.hostSocket(t, s, "--csi-address="); got != r.hostSocket(t, c, "--endpoint=") {
				t.Errorf("the sidecar reaches %s, the driver serves at %s", got, r.hostSocket(t, c, "--endpoint="))
			}
			if got, _ := flagValue(s.Args, kubeletPathFlag); got != path.Join(pluginDir, "csi.sock") {
				t.Errorf("the sidecar announces %q, want %s", got, path.Join(pluginDir, "csi.sock"))
			}
			if got := r.hostPathOf(t, s, "/registration"); got != pluginsRegistry {
				t.Errorf("the sidecar's /registration is host path %q, want %s", got, pluginsRegistry)
			}
			checkTokenInDriverAlone(t, &r.daemonSet.Spec.Template.Spec)
		})
	}
}

// checkTokenInDriverAlone: the pod mounts no ServiceAccount token by
// itself; the driver container secrets-store, and no sidecar, mounts the
// projected volume api-access (a token of the driver's ServiceAccount, the
// CA, the namespace) where client-go reads them.
func checkTokenInDriverAlone(t *testing.T, pod *corev1.PodSpec) {
	t.Helper()
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the driver's pod mounts its ServiceAccount token into every container")
	}
	for _, c := range pod.Containers {
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "api-access" && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly
		})
		if want := c.Name == "secrets-store"; mounted != want {
			t.Errorf("container %s: the driver's API credentials mounted %v, want %v", c.Name, mounted, want)
		}
	}
	i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "api-access" })
	if i < 0 || pod.Volumes[i].Projected == nil || len(pod.Volumes[i].Projected.Sources) != 3 || pod.Volumes[i].Projected.Sources[0].ServiceAccountToken == nil {
		t.Error("no projected volume api-access with the ServiceAccount's token, the CA and the namespace")
	}
}

// TestRegistrarSidecarRefusesMovedFlags: the component removes the
// driver's registration flags by position; when they have moved, rendering
// fails instead of removing other flags.
func TestRegistrarSidecarRefusesMovedFlags(t *testing.T) {
	mem := deployFS(t)
	data, err := mem.ReadFile("/deploy/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// --health-addr moves from before the registration flags to after them:
	// the same number of arguments, other ones at the removed positions.
	const health = "            - --health-addr=:9808\n"
	const last = "            - --kubelet-registration-path=/var/lib/kubelet/plugins/csi-secrets-store/csi.sock\n"
	moved := strings.Replace(strings.Replace(string(data), health, "", 1), last, last+health, 1)
	if moved == string(data) || strings.Count(moved, health) != 1 {
		t.Fatal("the DaemonSet's arguments are not where this test expects them")
	}
	if err := mem.WriteFile("/deploy/daemonset.yaml", []byte(moved)); err != nil {
		t.Fatal(err)
	}
	mustRender(t, mem, "/deploy") // the base alone still renders
	r, err := render(t, mem, overlay(t, mem, registrarSidecarPath))
	if err == nil {
		t.Fatalf("rendered with moved flags; keymount args %q", r.container(t, "secrets-store").Args)
	}
}

// TestCSIDriver: the shipped CSIDriver keeps upstream's settings and asks
// kubelet to hand the pod's fsGroup to the driver.
func TestCSIDriver(t *testing.T) {
	r := mustRender(t, deployFS(t), "/deploy")
	if r.csiDriver == nil {
		t.Fatalf("no CSIDriver in %v", r.kinds)
	}
	file := storagev1.FileFSGroupPolicy
	yes, no := true, false
	want := storagev1.CSIDriverSpec{
		AttachRequired:       &no,
		PodInfoOnMount:       &yes,
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
		RequiresRepublish:    &yes,
		FSGroupPolicy:        &file,
		TokenRequests:        []storagev1.TokenRequest{},
	}
	if r.csiDriver.Name != "secrets-store.csi.k8s.io" {
		t.Errorf("CSIDriver name %q, want upstream's secrets-store.csi.k8s.io", r.csiDriver.Name)
	}
	if diff := cmp.Diff(want, r.csiDriver.Spec); diff != "" {
		t.Errorf("CSIDriver spec (-want +got):\n%s", diff)
	}
}

// TestProviderKustomizationRenders: the provider kustomizations render too.
func TestProviderKustomizationRenders(t *testing.T) {
	mem := deployFS(t)
	if _, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/deploy/providers/aws"); err != nil {
		t.Fatalf("render providers/aws: %v", err)
	}
}
