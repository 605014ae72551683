package node_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/tests/nodeenv"
)

func TestSmoke(t *testing.T) {
	n := nodeenv.Start(t, nodeenv.Options{})
	n.PrepareNamespace(t, "smoke")
	pod := n.ProbePod("smoke", "hello", "show", "-follow", "/etc/hosts")
	pod, err := n.Kube.CoreV1().Pods("smoke").Create(t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.WaitPod(t, "smoke", "hello", "Running", nodeenv.Running)
	n.WaitLog(t, pod, "probe", "/etc/hosts", func(l string) bool { return strings.HasPrefix(l, "file /etc/hosts ") })
}
