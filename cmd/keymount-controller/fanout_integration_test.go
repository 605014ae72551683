//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/fanout"
	"github.com/keymount/keymount/controller/reflector"
	"github.com/keymount/keymount/controller/syncrequest"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/tests/poll"
)

// TestBinaryFanout runs keymount-controller with --enable-fanout against a
// real API server: a SecretSync whose secretObject.annotations carry
// reflector's annotations is a source — its Secret, filled from the local
// provider, is copied into the matching namespaces, one created later
// included, and not into the others; its next content reaches the copies.
func TestBinaryFanout(t *testing.T) {
	env, cs, c := startCluster(t)
	ctx := t.Context()
	for _, ns := range []string{"team-a", "other"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	store := t.TempDir()
	if err := os.WriteFile(filepath.Join(store, "token"), []byte("pull-v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir := sockettest.Dir(t)
	serveLocal(t, sockDir, store)
	kubeconfig, _ := env.KubeconfigFor(t, "keymount-controller", []string{"system:masters"})
	startBinary(t, buildBinary(t), []string{
		"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--enable-fanout", "--rotation-poll-interval=0s",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
	}, syncrequest.EnvPodNamespace+"=keymount-system", syncrequest.EnvPodName+"=keymount-controller-0")

	class := &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "store"},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: "local", Parameters: map[string]string{"objects": "- objectName: token\n"}},
	}
	ss := &ss1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "pull", Annotations: map[string]string{"keymount.io/rotation-interval": "1s"}},
		Spec: ss1.SecretSyncSpec{SecretProviderClassName: "store", ServiceAccountName: "app", SecretObject: ss1.SecretObject{
			Type: "Opaque", Data: []ss1.SecretObjectData{{SourcePath: "token", TargetKey: "token"}},
			Annotations: map[string]string{
				reflector.AnnotationAllowed: "true", reflector.AnnotationAutoEnabled: "true",
				reflector.AnnotationAutoNamespaces: "team-.*",
			},
		}},
	}
	create(t, c, class, ss)
	copyIs := func(ns, want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			s, err := cs.CoreV1().Secrets(ns).Get(ctx, "pull", metav1.GetOptions{})
			if err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return string(s.Data["token"]) == want && s.Labels[fanout.LabelCopy] == reflector.WriterName &&
				s.Annotations[reflector.AnnotationReflects] == "app/pull", nil
		}
	}
	poll.Until(t, "the copy in team-a", copyIs("team-a", "pull-v1"))
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the copy in team-b, created later", copyIs("team-b", "pull-v1"))
	if err := os.WriteFile(filepath.Join(store, "token"), []byte("pull-v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the store's new value in team-a's copy", copyIs("team-a", "pull-v2"))
	poll.Until(t, "the store's new value in team-b's copy", copyIs("team-b", "pull-v2"))
	if _, err := cs.CoreV1().Secrets("other").Get(ctx, "pull", metav1.GetOptions{}); err == nil {
		t.Error("a copy in namespace other, which the source does not match")
	}
}

// BenchmarkFanoutRSS starts keymount-controller with --enable-fanout in a
// cluster holding 10,000 and then 50,000 unrelated Secrets (and one source
// auto-reflected into 10 namespaces), waits for the copies and reports the
// process's resident memory then:
// go test -tags integration -run XXX -bench FanoutRSS -benchtime 1x ./cmd/keymount-controller/
func BenchmarkFanoutRSS(b *testing.B) {
	env, cs, _ := startCluster(b)
	ctx := b.Context()
	for _, ns := range []string{"bulk", "team-0", "team-1", "team-2", "team-3", "team-4", "team-5", "team-6", "team-7", "team-8", "team-9"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "tls", Annotations: map[string]string{
		reflector.AnnotationAllowed: "true", reflector.AnnotationAutoEnabled: "true", reflector.AnnotationAutoNamespaces: "team-.*",
	}}, StringData: map[string]string{"tls.crt": "cert"}}
	if _, err := cs.CoreV1().Secrets("app").Create(ctx, src, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	sockDir := sockettest.Dir(b)
	kubeconfig, _ := env.KubeconfigFor(b, "keymount-controller", []string{"system:masters"})
	bin := buildBinary(b)
	have := 0
	for _, n := range []int{10000, 50000} {
		createUnrelated(b, cs, have, n-have)
		have = n
		b.Run(fmt.Sprintf("unrelated=%d", n), func(b *testing.B) {
			for range b.N {
				proc := startBinary(b, bin, []string{"--kubeconfig=" + kubeconfig, "--provider-volume=" + sockDir, "--enable-fanout",
					"--metrics-bind-address=0", "--health-probe-bind-address=0"}, syncrequest.EnvPodNamespace+"=keymount-system")
				poll.Until(b, "the copies", func(ctx context.Context) (bool, error) {
					l, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: fanout.LabelCopy})
					return err == nil && len(l.Items) == 10, nil
				})
				b.ReportMetric(rssMiB(b, proc.Process.Pid), "MiB-RSS")
				_ = proc.Process.Kill()
				_ = proc.Wait()
			}
		})
	}
}

// createUnrelated creates n Secrets in namespace bulk, 16 at a time.
func createUnrelated(b *testing.B, cs kubernetes.Interface, from, n int) {
	b.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	var failed atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := range next {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i)},
					StringData: map[string]string{"k": "a value of a realistic size, some sixty-four bytes long ......"}}
				if _, err := cs.CoreV1().Secrets("bulk").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for i := from; i < from+n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d Secrets not created", f)
	}
}

// rssMiB reads a process's resident set size.
func rssMiB(b *testing.B, pid int) float64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
