package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/nodeenv"
)

// mountPath is where test pods mount their secrets volume.
const mountPath = "/mnt/secrets"

// namespace creates a namespace of the test's own, ready for pods.
func namespace(t *testing.T, n *nodeenv.Node) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(ns) > 40 {
		ns = ns[:40]
	}
	ns = strings.Trim(ns, "-") + "-" + randomHex(3)
	n.PrepareNamespace(t, ns)
	return ns
}

// putObject writes an object of the local provider (atomically: a rename)
// and forbids its value in every log.
func putObject(t *testing.T, n *nodeenv.Node, name, value string) {
	t.Helper()
	path := filepath.Join(n.ProviderRoot, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	forbidden.add(value, "the value of local object "+name)
}

// localClass creates a SecretProviderClass of the local provider; objects
// is its "objects" parameter.
func localClass(t *testing.T, n *nodeenv.Node, ns, name, objects string, sync ...*secretsstorev1.SecretObject) {
	t.Helper()
	spc := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: secretsstorev1.SecretProviderClassSpec{
			Provider:      "local",
			Parameters:    map[string]string{"objects": objects},
			SecretObjects: sync,
		},
	}
	if err := n.Ctrl.Create(t.Context(), spc); err != nil {
		t.Fatalf("create SecretProviderClass %s/%s: %v", ns, name, err)
	}
}

// withVolume adds an inline secrets-store volume of class to the pod's
// spec, mounted read-only at mountPath in every container.
func withVolume(spec *corev1.PodSpec, class string) {
	readOnly := true
	spec.Volumes = append(spec.Volumes, corev1.Volume{
		Name: "secrets",
		VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
			Driver:           nodeenv.DriverName,
			ReadOnly:         &readOnly,
			VolumeAttributes: map[string]string{"secretProviderClass": class},
		}},
	})
	for i := range spec.Containers {
		spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts,
			corev1.VolumeMount{Name: "secrets", MountPath: mountPath, ReadOnly: true})
	}
}

// createPod creates a probe pod running args with a volume of class.
func createPod(t *testing.T, n *nodeenv.Node, ns, name, class string, args ...string) *corev1.Pod {
	t.Helper()
	pod := n.ProbePod(ns, name, args...)
	withVolume(&pod.Spec, class)
	return submit(t, n, pod)
}

func submit(t *testing.T, n *nodeenv.Node, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := n.Kube.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return created
}

// fileLine is what the probe prints for a file it read: a prefix, since
// the mode and group follow.
func fileLine(name string) string { return fmt.Sprintf("file %s/%s ", mountPath, name) }

// hasContent matches the probe's line for file name holding value.
func hasContent(name, value string) func(string) bool {
	return func(l string) bool {
		return strings.HasPrefix(l, fileLine(name)) && strings.HasSuffix(l, fmt.Sprintf(" content=%q", value))
	}
}
