package keymount_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// providerBinary is how every keymount provider container's command starts.
const providerBinary = "/usr/local/bin/keymount-provider-"

// providerContainers are the keymount provider containers of r, by
// "<workload>/<container>": every container of every DaemonSet and
// Deployment whose command is a keymount provider binary.
func providerContainers(r *release) map[string]*corev1.Container {
	out := map[string]*corev1.Container{}
	add := func(workload string, spec *corev1.PodSpec) {
		for i := range spec.Containers {
			c := &spec.Containers[i]
			if len(c.Command) > 0 && strings.HasPrefix(c.Command[0], providerBinary) {
				out[workload+"/"+c.Name] = c
			}
		}
	}
	for name, ds := range r.daemonSets {
		add(name, &ds.Spec.Template.Spec)
	}
	for name, d := range r.deployments {
		add(name, &d.Spec.Template.Spec)
	}
	return out
}

// socketArgs are the args of a provider container that place its socket.
func socketArgs(args []string) []string {
	var out []string
	for _, a := range args {
		for _, flag := range []string{"--provider-dir=", "--name=", "-endpoint=", "--provider-volume="} {
			if strings.HasPrefix(a, flag) {
				out = append(out, a)
			}
		}
	}
	return out
}

// TestProviderProbes: with every feature on, each keymount provider
// container (the three DaemonSets' and the controller's three sidecars) has
// a liveness and a readiness probe running its own binary with --probe and
// every arg that places its socket, timed by providers.probes; the probe
// gives the provider one second less than kubelet gives the probe.
func TestProviderProbes(t *testing.T) {
	r := render(t, allFeatures)
	got := providerContainers(r)
	want := []string{
		releaseName + "-controller/provider-aws", releaseName + "-controller/provider-local", releaseName + "-controller/provider-vault",
		releaseName + "-provider-aws/provider", releaseName + "-provider-local/provider", releaseName + "-provider-vault/provider",
	}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, want) {
		t.Fatalf("provider containers %v, want %v", names, want)
	}
	for name, c := range got {
		for kind, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil || p.Exec == nil {
				t.Errorf("%s: no exec %s probe: %+v", name, kind, p)
				continue
			}
			cmd := p.Exec.Command
			if len(cmd) < 3 || cmd[0] != c.Command[0] || cmd[1] != "--probe" || cmd[2] != "--probe-timeout=4s" {
				t.Errorf("%s: %s probe runs %q, want %s --probe --probe-timeout=4s ...", name, kind, cmd, c.Command[0])
			}
			if s := socketArgs(c.Args); len(s) == 0 || !slices.Equal(socketArgs(cmd), s) {
				t.Errorf("%s: %s probe's socket args %q, want the container's %q", name, kind, socketArgs(cmd), s)
			}
			if p.PeriodSeconds != 10 || p.TimeoutSeconds != 5 {
				t.Errorf("%s: %s probe every %ds with timeout %ds, want 10 and 5", name, kind, p.PeriodSeconds, p.TimeoutSeconds)
			}
		}
		if l := c.LivenessProbe; l != nil && (l.FailureThreshold != 3 || l.TerminationGracePeriodSeconds == nil || *l.TerminationGracePeriodSeconds != 5) {
			t.Errorf("%s: liveness failureThreshold %d, terminationGracePeriodSeconds %v; want 3 and 5", name, l.FailureThreshold, l.TerminationGracePeriodSeconds)
		}
		if r := c.ReadinessProbe; r != nil && r.FailureThreshold != 1 {
			t.Errorf("%s: readiness failureThreshold %d, want 1", name, r.FailureThreshold)
		}
	}
}

// TestProviderProbeValues: providers.probes times every probe; a provider's
// extraArgs (which may move its socket, as vault-csi-provider's -endpoint
// does) reach its probe; enabled: false leaves the probes out; a timeout
// under 2 seconds is refused by the schema.
func TestProviderProbeValues(t *testing.T) {
	probes := map[string]any{
		"periodSeconds": 7, "timeoutSeconds": 3, "livenessFailureThreshold": 6,
		"readinessFailureThreshold": 2, "livenessTerminationGracePeriodSeconds": 9,
	}
	vals := merge(readValues(t, allFeatures), map[string]any{"providers": map[string]any{
		"probes": probes,
		"vault":  map[string]any{"extraArgs": []any{"-endpoint=/elsewhere/v.sock"}},
	}})
	for name, c := range providerContainers(renderValues(t, vals)) {
		l, rd := c.LivenessProbe, c.ReadinessProbe
		if l == nil || rd == nil {
			t.Errorf("%s: liveness %v, readiness %v", name, l, rd)
			continue
		}
		if l.PeriodSeconds != 7 || l.TimeoutSeconds != 3 || l.FailureThreshold != 6 || *l.TerminationGracePeriodSeconds != 9 ||
			rd.PeriodSeconds != 7 || rd.TimeoutSeconds != 3 || rd.FailureThreshold != 2 {
			t.Errorf("%s: liveness %+v, readiness %+v: not the values' timing", name, l, rd)
		}
		if !hasArg(l.Exec.Command, "--probe-timeout=2s") {
			t.Errorf("%s: probe %q, want --probe-timeout=2s", name, l.Exec.Command)
		}
		if strings.Contains(name, "vault") && !hasArg(l.Exec.Command, "-endpoint=/elsewhere/v.sock") {
			t.Errorf("%s: probe %q lacks the extraArgs' -endpoint", name, l.Exec.Command)
		}
	}

	off := merge(readValues(t, allFeatures), map[string]any{"providers": map[string]any{"probes": map[string]any{"enabled": false}}})
	for name, c := range providerContainers(renderValues(t, off)) {
		if c.LivenessProbe != nil || c.ReadinessProbe != nil {
			t.Errorf("%s with probes off: liveness %v, readiness %v", name, c.LivenessProbe, c.ReadinessProbe)
		}
	}

	short := merge(readValues(t, allFeatures), map[string]any{"providers": map[string]any{"probes": map[string]any{"timeoutSeconds": 1}}})
	if _, err := renderRaw(loadChart(t), short); err == nil || !strings.Contains(err.Error(), "timeoutSeconds") {
		t.Errorf("providers.probes.timeoutSeconds 1: %v, want the schema's error naming it", err)
	}
}
