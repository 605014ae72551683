package keymount_test

import (
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// privilegedContainers are the only containers that may run privileged,
// by DaemonSet: the node plugin's (named keymount in the chart's release
// and in kustomize), which mounts tmpfs into pod volumes and propagates
// the mounts back to the host.
var privilegedContainers = map[string]string{releaseName: driverContainer}

// TestEveryContainerHardened renders every container the chart can run
// (all-features values: both providers, both sidecars) and the kustomize
// manifests (base, registrar sidecar, AWS and Vault providers), and checks each one's
// effective security context: the RuntimeDefault seccomp profile and a
// read-only root file system everywhere; outside the node plugin's one
// privileged container, no privilege, no privilege escalation and every
// capability dropped. And no pod on the node's network by default.
func TestEveryContainerHardened(t *testing.T) {
	chart := render(t, "testdata/all-features.yaml")
	checkHardened(t, "chart", chart.daemonSets, 4, 6)
	sets := map[string]*appsv1.DaemonSet{}
	for _, k := range []*kustomized{
		kustomize(t, ""), kustomize(t, "", "registrar-sidecar"), kustomize(t, "providers/aws"), kustomize(t, "providers/vault"),
	} {
		for name, ds := range k.daemonSets {
			if prev, ok := sets[name]; ok && len(prev.Spec.Template.Spec.Containers) > len(ds.Spec.Template.Spec.Containers) {
				continue // keep the variant with the most containers
			}
			sets[name] = ds
		}
	}
	checkHardened(t, "kustomize", sets, 3, 4)
	for name, ds := range chart.daemonSets {
		if ds.Spec.Template.Spec.HostNetwork {
			t.Errorf("chart DaemonSet %s is on the node's network with the all-features values", name)
		}
	}
	for name, ds := range sets {
		if ds.Spec.Template.Spec.HostNetwork {
			t.Errorf("kustomize DaemonSet %s is on the node's network", name)
		}
	}
}

// checkHardened checks every container of sets; wantSets and
// wantContainers make sure nothing was left out.
func checkHardened(t *testing.T, source string, sets map[string]*appsv1.DaemonSet, wantSets, wantContainers int) {
	t.Helper()
	if len(sets) != wantSets {
		t.Errorf("%s: %d DaemonSets %v, want %d", source, len(sets), slices.Sorted(maps.Keys(sets)), wantSets)
	}
	containers := 0
	for name, ds := range sets {
		pod := ds.Spec.Template.Spec
		for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
			containers++
			where := source + " " + name + "/" + c.Name
			sc := c.SecurityContext
			if sc == nil {
				t.Errorf("%s: no securityContext", where)
				continue
			}
			if profile := effectiveSeccomp(&pod, &c); profile != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: seccomp profile %q, want RuntimeDefault", where, profile)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: root file system not read-only", where)
			}
			if sc.Privileged != nil && *sc.Privileged {
				if privilegedContainers[name] != c.Name {
					t.Errorf("%s: privileged, and only the node plugin's keymount container may be", where)
				}
				continue
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: privilege escalation allowed", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities %+v, want all dropped and none added", where, sc.Capabilities)
			}
		}
	}
	if containers < wantContainers {
		t.Errorf("%s: checked %d containers, want at least %d", source, containers, wantContainers)
	}
}

// effectiveSeccomp is the seccomp profile c runs with: its own, else the
// pod's.
func effectiveSeccomp(pod *corev1.PodSpec, c *corev1.Container) corev1.SeccompProfileType {
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		return c.SecurityContext.SeccompProfile.Type
	}
	if pod.SecurityContext != nil && pod.SecurityContext.SeccompProfile != nil {
		return pod.SecurityContext.SeccompProfile.Type
	}
	return ""
}

// TestAWSProviderHostNetworkIsOptIn: the AWS provider runs on the pod
// network unless providers.aws.hostNetwork asks for the node's.
func TestAWSProviderHostNetworkIsOptIn(t *testing.T) {
	const name = releaseName + "-provider-aws"
	for _, tc := range []struct {
		hostNetwork any // nil: the default
		want        bool
	}{{nil, false}, {false, false}, {true, true}} {
		aws := map[string]any{"enabled": true}
		if tc.hostNetwork != nil {
			aws["hostNetwork"] = tc.hostNetwork
		}
		r := renderValues(t, map[string]any{"providers": map[string]any{"aws": aws}})
		ds := r.daemonSets[name]
		if ds == nil {
			t.Fatalf("no DaemonSet %s", name)
		}
		pod := ds.Spec.Template.Spec
		if pod.HostNetwork != tc.want {
			t.Errorf("providers.aws.hostNetwork=%v: hostNetwork %v, want %v", tc.hostNetwork, pod.HostNetwork, tc.want)
		}
		wantDNS := corev1.DNSPolicy("")
		if tc.want {
			wantDNS = corev1.DNSClusterFirstWithHostNet
		}
		if pod.DNSPolicy != wantDNS {
			t.Errorf("providers.aws.hostNetwork=%v: dnsPolicy %q, want %q", tc.hostNetwork, pod.DNSPolicy, wantDNS)
		}
		// Its only TCP listener is where the flag and the port agree.
		c := container(t, &pod, "provider")
		if !hasArg(c.Args, "--metrics-addr=:8097") || len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8097 || c.Ports[0].Name != "metrics" {
			t.Errorf("providers.aws.hostNetwork=%v: args %q, ports %+v: want --metrics-addr=:8097 and its port", tc.hostNetwork, c.Args, c.Ports)
		}
		if slices.ContainsFunc(c.Args, func(a string) bool { return a == "--enable-pprof" || a == "--enable-pprof=true" }) {
			t.Errorf("providers.aws.hostNetwork=%v: pprof on by default", tc.hostNetwork)
		}
	}
}
