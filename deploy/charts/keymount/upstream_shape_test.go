package keymount_test

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// driverContainer is the driver's container: upstream's name, which log
// queries, PodMonitors and policy exceptions written for upstream match.
const driverContainer = "secrets-store"

// TestUpstreamShape: with upstream's values the driver pods look as
// upstream's to whatever selects them: upstream's pod labels, the
// container secrets-store with its health port 9808 (named healthz, the
// liveness probe's target) and metrics port, and upstream's sidecars
// (node-driver-registrar, liveness-probe on 9808). With keymount's own
// values the labels, name and port are the same, without the sidecars.
func TestUpstreamShape(t *testing.T) { //nolint:gocyclo // one check after another over one render, read top to bottom
	appVersion := loadChart(t).Metadata.AppVersion
	for _, tc := range []struct {
		name     string
		files    []string
		sidecars bool
	}{
		{"upstream values", []string{upstreamValues}, true},
		{"upstream values and the other upstream keys", []string{upstreamValues, upstreamOtherKeys}, true},
		{"keymount's defaults", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds, c := render(t, tc.files...).driver(t)
			pod := ds.Spec.Template
			for k, v := range map[string]string{
				"app":                          "secrets-store-csi-driver",
				"app.kubernetes.io/instance":   releaseName,
				"app.kubernetes.io/managed-by": "Helm",
				"app.kubernetes.io/version":    appVersion,
			} {
				if got := pod.Labels[k]; got != v {
					t.Errorf("pod label %s=%q, want %q (upstream's)", k, got, v)
				}
			}
			if _, ok := pod.Labels["helm.sh/chart"]; !ok {
				t.Errorf("pod labels %v lack helm.sh/chart", pod.Labels)
			}
			if got := pod.Annotations["kubectl.kubernetes.io/default-container"]; got != driverContainer {
				t.Errorf("default container %q, want %s", got, driverContainer)
			}
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["healthz"] != 9808 || ports["metrics"] != 8095 {
				t.Errorf("driver ports %v: want healthz 9808 and metrics 8095, upstream's", ports)
			}
			if c.LivenessProbe.HTTPGet.Port.String() != "healthz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
				t.Errorf("liveness probe %v: want /healthz on the port healthz", c.LivenessProbe.HTTPGet)
			}
			names := containerNames(pod.Spec.Containers)
			if !tc.sidecars {
				if len(names) != 1 || !hasArg(c.Args, "--health-addr=:9808") || !hasArg(c.Args, "--plugin-registration-dir=/registration") {
					t.Errorf("containers %v, args %q: want the driver alone, registering itself, its health on :9808", names, c.Args)
				}
				return
			}
			if want := []string{driverContainer, "node-driver-registrar", "liveness-probe"}; !slices.Equal(names, want) {
				t.Fatalf("containers %v, want %v (upstream's sidecars)", names, want)
			}
			probe := container(t, &pod.Spec, "liveness-probe")
			if !hasArg(probe.Args, "--http-endpoint=0.0.0.0:9808") {
				t.Errorf("livenessprobe args %q: want it on upstream's 9808", probe.Args)
			}
			if hasArg(c.Args, "--plugin-registration-dir=/registration") || !hasArg(c.Args, "--health-addr=:9809") {
				t.Errorf("args %q: want registration left to the sidecar and keymount's own health on :9809", c.Args)
			}
			reg := container(t, &pod.Spec, "node-driver-registrar")
			if reg.Image != "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0" || !hasArg(reg.Args, "--v=5") {
				t.Errorf("registrar image %q, args %q: want upstream's values", reg.Image, reg.Args)
			}
		})
	}
}

// TestUpstreamSidecarsFollowTheirKeys: an upstream values file turns the
// sidecars on only where keymount's keys do not say otherwise.
func TestUpstreamSidecarsFollowTheirKeys(t *testing.T) {
	vals := merge(readValues(t, upstreamValues), map[string]any{"linux": map[string]any{
		"registrar":     map[string]any{"enabled": false},
		"livenessProbe": map[string]any{"enabled": false},
	}})
	ds, c := renderValues(t, vals).driver(t)
	if names := containerNames(ds.Spec.Template.Spec.Containers); len(names) != 1 || !hasArg(c.Args, "--health-addr=:9808") {
		t.Errorf("containers %v, args %q: want the driver alone on 9808", names, c.Args)
	}
	// A partial upstream file (no linux.crds, no windows) is keymount's shape.
	ds, _ = renderValues(t, map[string]any{"syncSecret": map[string]any{"enabled": true}}).driver(t)
	if names := containerNames(ds.Spec.Template.Spec.Containers); len(names) != 1 {
		t.Errorf("containers %v, want the driver alone", names)
	}
}

// TestAutomountServiceAccountToken: upstream's automountServiceAccountToken
// (true by default, as upstream's) mounts the driver's token, the CA and the
// namespace into the driver container, where client-go reads them, and into
// no sidecar: the pod itself never mounts the token into every container.
func TestAutomountServiceAccountToken(t *testing.T) {
	for _, tc := range []struct {
		vals     map[string]any
		want     bool
		sidecars bool
	}{
		{map[string]any{}, true, false},
		{readValues(t, upstreamValues), true, false},
		{readValues(t, allFeatures), true, true},
		{merge(readValues(t, allFeatures), map[string]any{"automountServiceAccountToken": false}), false, true},
	} {
		ds, _ := renderValues(t, tc.vals).driver(t)
		pod := ds.Spec.Template.Spec
		if !ptr.Equal(pod.AutomountServiceAccountToken, ptr.To(false)) {
			t.Errorf("the pod's automountServiceAccountToken %v, want false", pod.AutomountServiceAccountToken)
		}
		with := []string{driverContainer}
		if !tc.want {
			with = nil
			if slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == apiAccess }) {
				t.Error("automountServiceAccountToken=false, yet the pod has the volume api-access")
			}
		} else {
			checkAPIAccess(t, &pod, with...)
		}
		for _, c := range pod.Containers {
			for _, m := range c.VolumeMounts {
				if m.MountPath == saPath && !slices.Contains(with, c.Name) {
					t.Errorf("container %s mounts %s at %s", c.Name, m.Name, m.MountPath)
				}
			}
		}
		if tc.sidecars && len(pod.Containers) != 3 {
			t.Errorf("containers %v, want the driver, the registrar and the liveness probe", containerNames(pod.Containers))
		}
	}
}

// TestDriverImageNeverRewritten: upstream's own default image stands for
// keymount's release image; a mirror of upstream's image fails the render
// naming linux.image.repository and what to set; every other repository
// (a keymount image in a mirror) is used as given, tag and digest too.
func TestDriverImageNeverRewritten(t *testing.T) {
	ch := loadChart(t)
	release := "ghcr.io/keymount/keymount-driver:" + ch.Metadata.AppVersion
	for _, tc := range []struct {
		repository, tag, want, fails string
	}{
		{"registry.k8s.io/csi-secrets-store/driver", "v1.6.0", release, ""},
		{"k8s.gcr.io/csi-secrets-store/driver", "v1.2.4", release, ""},
		{"registry.corp.example/mirror/csi-secrets-store/driver", "v1.6.0", "", "registry.corp.example/mirror/keymount-driver"},
		{"123456789012.dkr.ecr.eu-west-1.amazonaws.com/csi-secrets-store/driver", "v1.6.0", "", "linux.image.tag"},
		{"registry.corp.example/mirror/keymount-driver", "v0.1.0", "registry.corp.example/mirror/keymount-driver:v0.1.0", ""},
	} {
		vals := merge(readValues(t, upstreamValues), map[string]any{"linux": map[string]any{
			"image": map[string]any{"repository": tc.repository, "tag": tc.tag},
		}})
		out, err := renderRaw(ch, vals)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), "linux.image.repository") || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("%s: render error %v, want one naming linux.image.repository and %s", tc.repository, err, tc.fails)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.repository, err)
			continue
		}
		if !strings.Contains(out["keymount/templates/daemonset.yaml"], "image: \""+tc.want+"\"") {
			t.Errorf("%s: the DaemonSet does not run %s", tc.repository, tc.want)
		}
	}
}

// TestNotesSayUpstreamImageMapped: the install notes say when upstream's
// default image stands for keymount's release image, and not otherwise.
func TestNotesSayUpstreamImageMapped(t *testing.T) {
	for _, tc := range []struct {
		vals map[string]any
		want bool
	}{
		{readValues(t, upstreamValues), true},
		{map[string]any{}, false},
	} {
		notes := renderNotes(t, tc.vals)
		if got := strings.Contains(notes, "the chart runs keymount's release"); got != tc.want {
			t.Errorf("notes mention the mapped image: %v, want %v:\n%s", got, tc.want, notes)
		}
	}
}

// renderNotes returns the install notes (NOTES.txt) for vals.
func renderNotes(t *testing.T, vals map[string]any) string {
	t.Helper()
	ch := loadChart(t)
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kubeVersion
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	return out["keymount/templates/NOTES.txt"]
}
