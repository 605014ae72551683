package k8senv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/keymount/keymount/tests/k8senv"
)

// TestAPIServerStopAndStart stops and starts kube-apiserver twice under
// clients built before the first stop: each works before, is refused while
// the server is stopped, and works after, with what was stored before (etcd
// kept running) and with the same certificates (the admin's client
// certificate and a provisioned user's still authenticate). A
// kube-apiserver left stopped when the test ends is cleaned up like a
// running one.
func TestAPIServerStopAndStart(t *testing.T) {
	var host string
	t.Run("restarts", func(t *testing.T) {
		env := k8senv.Start(t, k8senv.Options{})
		host = env.Config.Host
		admin := kubernetes.NewForConfigOrDie(env.Config)
		_, aliceCfg := env.KubeconfigFor(t, "alice", []string{"team-a"})
		alice := kubernetes.NewForConfigOrDie(aliceCfg)

		if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createConfigMap(t, admin, "before", nil)
		for round := 1; round <= 2; round++ {
			env.StopAPIServer(t)
			if err := getConfigMap(t.Context(), admin, "before"); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("round %d: reading while kube-apiserver is stopped: err = %v, want connection refused", round, err)
			}
			if _, err := whoAmI(t.Context(), alice); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("round %d: alice's review while kube-apiserver is stopped: err = %v, want connection refused", round, err)
			}
			env.StartAPIServer(t)

			if err := getConfigMap(t.Context(), admin, "before"); err != nil {
				t.Fatalf("round %d: reading what was stored before the stop: %v", round, err)
			}
			createConfigMap(t, admin, fmt.Sprintf("after-%d", round), nil)
			user, err := whoAmI(t.Context(), alice)
			if err != nil {
				t.Fatalf("round %d: alice's client certificate after the restart: %v", round, err)
			}
			if user.Username != "alice" || !slices.Contains(user.Groups, "team-a") {
				t.Errorf("round %d: authenticated as %q in %v, want alice in team-a", round, user.Username, user.Groups)
			}
		}
		// Left stopped: the cleanup must not mind.
		env.StopAPIServer(t)
	})
	if host == "" {
		t.Fatal("the environment did not start")
	}
	for _, p := range childProcesses(t, os.Getpid()) {
		if !p.zombie {
			t.Errorf("%s (pid %d) still runs after cleanup", p.binary, p.pid)
		}
	}
	if conn, err := dial(host); err == nil {
		_ = conn.Close()
		t.Errorf("%s accepts connections after cleanup", host)
	}
}

// getConfigMap reads a ConfigMap of namespace, with a deadline: a stopped
// server must refuse the connection, not leave it hanging.
func getConfigMap(ctx context.Context, client kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, eventually)
	defer cancel()
	_, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	return err
}

// whoAmI asks the API server who the client is.
func whoAmI(ctx context.Context, client kubernetes.Interface) (authenticationv1.UserInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, eventually)
	defer cancel()
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return review.Status.UserInfo, nil
}
