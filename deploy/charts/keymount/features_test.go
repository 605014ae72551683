package keymount_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAllFeatures checks what testdata/all-features.yaml asks for, one
// feature at a time.
func TestAllFeatures(t *testing.T) {
	r := render(t, allFeatures)
	for _, check := range []struct {
		name string
		fn   func(*testing.T, *release)
	}{
		{"kubelet root", checkKubeletRoot},
		{"images", checkImages},
		{"sidecars", checkSidecars},
		{"driver flags", checkDriverFlags},
		{"metrics service", checkMetricsService},
		{"token requests", checkTokenRequests},
		{"providers", checkProviders},
		{"priority class", checkPriorityClass},
		{"labels", checkLabels},
		{"controller guard rails", checkControllerPolicies},
	} {
		t.Run(check.name, func(t *testing.T) { check.fn(t, r) })
	}
}

// checkKubeletRoot: every kubelet path follows linux.kubeletRootDir.
func checkKubeletRoot(t *testing.T, r *release) {
	ds, c := r.driver(t)
	pod := ds.Spec.Template.Spec
	// Nothing of the default root is left, in flags, mounts or volumes.
	data, err := yaml.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "/var/lib/kubelet") {
		t.Errorf("the DaemonSet still names /var/lib/kubelet:\n%s", data)
	}
	const root = "/var/lib/k0s/kubelet"
	for _, arg := range []string{"--kubelet-root-dir=" + root} {
		if !hasArg(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	reg := container(t, &pod, "node-driver-registrar")
	if !hasArg(reg.Args, "--kubelet-registration-path="+root+"/plugins/csi-secrets-store/csi.sock") {
		t.Errorf("registrar args %q do not announce the socket under %s", reg.Args, root)
	}
	paths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			paths[v.Name] = v.HostPath.Path
		}
	}
	for name, want := range map[string]string{
		"plugin-dir": root + "/plugins/csi-secrets-store", "registration-dir": root + "/plugins_registry",
		"mountpoint-dir": root + "/pods", "providers-dir": "/run/secrets-store-csi-providers",
		"additional-providers-dir": "/etc/kubernetes/secrets-store-csi-providers", "additional-providers-dir-1": "/opt/providers",
	} {
		if paths[name] != want {
			t.Errorf("volume %s: host path %q, want %q", name, paths[name], want)
		}
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "mountpoint-dir" })
	if i < 0 || c.VolumeMounts[i].MountPath != root+"/pods" || *c.VolumeMounts[i].MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("pods directory not mounted at its host path %s/pods with Bidirectional propagation: %+v", root, c.VolumeMounts)
	}
}

// checkImages: a mirrored driver image pinned by digest; pull secrets in every pod.
func checkImages(t *testing.T, r *release) {
	_, c := r.driver(t)
	want := "registry.example.com/mirror/keymount-driver:v0.1.0-rc.1@sha256:" + strings.Repeat("0", 64)
	if c.Image != want || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("driver image %q (%s), want %q (Always)", c.Image, c.ImagePullPolicy, want)
	}
	for name, d := range r.daemonSets {
		if got := d.Spec.Template.Spec.ImagePullSecrets; !slices.Equal(got, []corev1.LocalObjectReference{{Name: "registry-credentials"}}) {
			t.Errorf("DaemonSet %s pull secrets %v", name, got)
		}
	}
}

// checkSidecars: both sidecars, the liveness probe on the livenessprobe sidecar.
func checkSidecars(t *testing.T, r *release) {
	ds, c := r.driver(t)
	pod := ds.Spec.Template.Spec
	names := containerNames(pod.Containers)
	if !slices.Equal(names, []string{driverContainer, "node-driver-registrar", "liveness-probe"}) {
		t.Fatalf("containers %v", names)
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--plugin-registration-dir") || strings.HasPrefix(a, "--kubelet-registration-path") {
			t.Errorf("with the registrar sidecar the driver still registers itself: %s", a)
		}
	}
	probe := container(t, &pod, "liveness-probe")
	if !hasArg(probe.Args, "--http-endpoint=0.0.0.0:9818") || !hasArg(probe.Args, "-v=3") {
		t.Errorf("livenessprobe args %q: want livenessProbe.port 9818 and logLevel 3", probe.Args)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if got := c.LivenessProbe.HTTPGet.Port.String(); got != "healthz" || ports["healthz"] != 9818 {
		t.Errorf("the driver's liveness probe asks port %s (healthz is %d), want healthz, the sidecar's 9818", got, ports["healthz"])
	}
	if got := c.ReadinessProbe.HTTPGet.Port.String(); got != "readyz" || ports["readyz"] != 9810 || !hasArg(c.Args, "--health-addr=:9810") {
		t.Errorf("readiness probe on %s (readyz is %d), args %q: want keymount's own /readyz on :9810", got, ports["readyz"], c.Args)
	}
	if reg := container(t, &pod, "node-driver-registrar"); !hasArg(reg.Args, "--v=4") {
		t.Errorf("registrar args %q: want --v=4 (linux.registrar.logVerbosity)", reg.Args)
	}
}

// checkDriverFlags: each value that is a driver flag reaches the driver.
func checkDriverFlags(t *testing.T, r *release) {
	_, c := r.driver(t)
	for _, arg := range []string{
		"--sync-secrets=true", "-v=4", "--log-format-json", "--enable-secret-rotation=true",
		"--rotation-poll-interval=5m", "--rotation-backoff-initial=10s", "--rotation-backoff-max=10m",
		"--provider-max-recv-size=8388608", "--metrics-addr=:9095", "--tmpfs-size=128Mi",
		"--additional-provider-dirs=/etc/kubernetes/secrets-store-csi-providers,/opt/providers",
	} {
		if !hasArg(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
}

// checkMetricsService: a headless Service over the driver pods' metrics port.
func checkMetricsService(t *testing.T, r *release) {
	ds, _ := r.driver(t)
	svc := r.services[releaseName+"-metrics"]
	if svc == nil {
		t.Fatalf("no metrics Service: %v", slices.Sorted(maps.Keys(r.services)))
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9095 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("metrics Service %+v: want headless, port 9095 to the pods' metrics port", svc.Spec)
	}
	for k, v := range svc.Spec.Selector {
		if pod := ds.Spec.Template.Labels[k]; pod != v {
			t.Errorf("Service selector %s=%s does not match the driver pods (%q)", k, v, pod)
		}
	}
}

// checkTokenRequests: tokenRequests plus the AWS and Vault providers'
// audiences, once each.
func checkTokenRequests(t *testing.T, r *release) {
	// The file's own audiences first, then the providers' that are not
	// already there: sts.amazonaws.com and vault once.
	want := []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: new(int64(3600))}, {Audience: "sts.amazonaws.com"}, {Audience: "pods.eks.amazonaws.com"}}
	if diff := cmp.Diff(want, r.csiDriver.Spec.TokenRequests); diff != "" {
		t.Errorf("tokenRequests (-want +got):\n%s", diff)
	}
}

// checkProviders: both provider DaemonSets with their values.
func checkProviders(t *testing.T, r *release) {
	aws := r.daemonSets[releaseName+"-provider-aws"]
	local := r.daemonSets[releaseName+"-provider-local"]
	if aws == nil || local == nil {
		t.Fatalf("provider DaemonSets %v", slices.Sorted(maps.Keys(r.daemonSets)))
	}
	ac := container(t, &aws.Spec.Template.Spec, "provider")
	if !hasArg(ac.Args, "--provider-dir=/run/secrets-store-csi-providers") || !hasArg(ac.Args, "--region=eu-west-1") || !hasArg(ac.Args, "--freshness=1m") {
		t.Errorf("AWS provider args %q", ac.Args)
	}
	lc := container(t, &local.Spec.Template.Spec, "provider")
	if !hasArg(lc.Args, "--name=files") || !hasArg(lc.Args, "--root=/secrets") || !hasArg(lc.Args, "--provider-dir=/run/secrets-store-csi-providers") ||
		!hasArg(lc.Args, "--allowed-namespaces=shop,demo") {
		t.Errorf("local provider args %q", lc.Args)
	}
	i := slices.IndexFunc(local.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "secrets" })
	if i < 0 || local.Spec.Template.Spec.Volumes[i].Secret == nil || local.Spec.Template.Spec.Volumes[i].HostPath != nil {
		t.Errorf("local provider's files: %+v, want the Secret of secretsVolume alone", local.Spec.Template.Spec.Volumes)
	}
	for _, d := range []string{"keymount-provider-aws", "keymount-provider-local", "keymount-provider-vault", releaseName} {
		if got := r.daemonSets[d].Spec.Template.Spec.PriorityClassName; got != "keymount-node-critical" {
			t.Errorf("%s priorityClassName %q", d, got)
		}
	}
}

// checkPriorityClass: priorityClass.create renders the PriorityClass.
func checkPriorityClass(t *testing.T, r *release) {
	i := slices.IndexFunc(r.objects, func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "PriorityClass" && o.GetName() == "keymount-node-critical"
	})
	if i < 0 {
		t.Error("no PriorityClass keymount-node-critical")
	}
}

// checkLabels: commonLabels on every object; pod labels and annotations.
func checkLabels(t *testing.T, r *release) {
	ds, _ := r.driver(t)
	for _, o := range r.objects {
		if o.GetLabels()["team"] != "platform" {
			t.Errorf("%s %s lacks commonLabels team=platform", o.GetKind(), o.GetName())
		}
	}
	if ds.Spec.Template.Labels["tier"] != "node" || ds.Spec.Template.Annotations["prometheus.io/scrape"] != "true" || ds.Annotations["example.com/owner"] != "platform" {
		t.Errorf("pod labels %v, pod annotations %v, DaemonSet annotations %v", ds.Spec.Template.Labels, ds.Spec.Template.Annotations, ds.Annotations)
	}
}

// TestNoSidecarsByDefault: by default the driver registers itself and
// answers its own liveness probe: one container.
func TestNoSidecarsByDefault(t *testing.T) {
	ds, c := render(t, "").driver(t)
	if names := containerNames(ds.Spec.Template.Spec.Containers); !slices.Equal(names, []string{driverContainer}) {
		t.Errorf("containers %v, want the driver alone", names)
	}
	if !hasArg(c.Args, "--plugin-registration-dir=/registration") || c.LivenessProbe.HTTPGet.Port.String() != "healthz" {
		t.Errorf("args %q, liveness port %s: want built-in registration and keymount's own healthz", c.Args, c.LivenessProbe.HTTPGet.Port.String())
	}
}

// TestSidecarPortMustDiffer: the livenessprobe sidecar cannot share the
// driver's health port (one pod network): the chart refuses to render.
func TestSidecarPortMustDiffer(t *testing.T) {
	vals := map[string]any{
		"linux":         map[string]any{"livenessProbe": map[string]any{"enabled": true}, "healthPort": 9808},
		"livenessProbe": map[string]any{"port": 9808},
	}
	if _, err := renderRaw(loadChart(t), vals); err == nil || !strings.Contains(err.Error(), "must differ") {
		t.Errorf("render with both on 9808: %v, want a refusal", err)
	}
}

// TestHostNetwork: on the node's network the driver's health server and
// the livenessprobe sidecar listen on 127.0.0.1 only and kubelet's probes
// ask there; the local provider follows its own key; off, neither is on
// the node's network.
func TestHostNetwork(t *testing.T) {
	r := renderValues(t, map[string]any{
		"linux":     map[string]any{"hostNetwork": true, "livenessProbe": map[string]any{"enabled": true}},
		"providers": map[string]any{"local": map[string]any{"enabled": true, "hostNetwork": true}},
	})
	ds, c := r.driver(t)
	pod := ds.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %q: want the node's network with cluster DNS", pod.HostNetwork, pod.DNSPolicy)
	}
	if !hasArg(c.Args, "--health-addr=127.0.0.1:9809") {
		t.Errorf("args %q: want the health server on 127.0.0.1:9809", c.Args)
	}
	if c.LivenessProbe.HTTPGet.Host != "127.0.0.1" || c.ReadinessProbe.HTTPGet.Host != "127.0.0.1" {
		t.Errorf("probes ask %q and %q, want 127.0.0.1", c.LivenessProbe.HTTPGet.Host, c.ReadinessProbe.HTTPGet.Host)
	}
	if probe := container(t, &pod, "liveness-probe"); !hasArg(probe.Args, "--http-endpoint=127.0.0.1:9808") {
		t.Errorf("livenessprobe args %q: want it on 127.0.0.1:9808", probe.Args)
	}
	local := r.daemonSets[releaseName+"-provider-local"]
	if local == nil || !local.Spec.Template.Spec.HostNetwork {
		t.Errorf("the local provider is not on the node's network: %v", local)
	}

	r = renderValues(t, map[string]any{"providers": map[string]any{"local": map[string]any{"enabled": true}}})
	ds, c = r.driver(t)
	if ds.Spec.Template.Spec.HostNetwork || r.daemonSets[releaseName+"-provider-local"].Spec.Template.Spec.HostNetwork {
		t.Error("by default a pod of the chart is on the node's network")
	}
	if !hasArg(c.Args, "--health-addr=:9808") || c.LivenessProbe.HTTPGet.Host != "" {
		t.Errorf("args %q, probe host %q: want the health server on every address of the pod", c.Args, c.LivenessProbe.HTTPGet.Host)
	}
}

// TestTokenInSecretsWhereKnown: the CSIDriver asks for the tokens in the
// secrets field on clusters that know the field (1.35+), by default; an
// older API server would refuse it, so it is left out there; off, never;
// nor when no token is requested (the API server refuses that too, and
// the defaults request none).
func TestTokenInSecretsWhereKnown(t *testing.T) {
	ch := loadChart(t)
	vault := map[string]any{"tokenRequests": []any{map[string]any{"audience": "vault"}}}
	for _, tc := range []struct {
		kv   chartutil.KubeVersion
		vals map[string]any
		want bool
	}{
		{chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}, vault, true},
		{chartutil.KubeVersion{Version: "v1.36.2-eks-1234", Major: "1", Minor: "36"}, vault, true},
		{chartutil.KubeVersion{Version: "v1.34.3", Major: "1", Minor: "34"}, vault, false},
		{kubeVersion, map[string]any{"serviceAccountTokenInSecrets": false, "tokenRequests": vault["tokenRequests"]}, false},
		// The AWS provider's audiences count as requested tokens.
		{kubeVersion, map[string]any{"providers": map[string]any{"aws": map[string]any{"enabled": true}}}, true},
		// No token requested (the defaults): the API server refuses the field.
		{kubeVersion, nil, false},
	} {
		out, err := renderRawAt(ch, tc.vals, tc.kv)
		if err != nil {
			t.Fatalf("%s: %v", tc.kv.Version, err)
		}
		var d storagev1.CSIDriver
		if err := yaml.UnmarshalStrict([]byte(out["keymount/templates/csidriver.yaml"]), &d); err != nil {
			t.Fatalf("%s: %v", tc.kv.Version, err)
		}
		if got := d.Spec.ServiceAccountTokenInSecrets != nil && *d.Spec.ServiceAccountTokenInSecrets; got != tc.want {
			t.Errorf("Kubernetes %s, values %v: serviceAccountTokenInSecrets %v, want %v", tc.kv.Version, tc.vals, got, tc.want)
		}
	}
}
