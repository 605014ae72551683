package identity

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/kubeclient/kubeclienttest"
)

func serviceAccount(ns, name, role string) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if role != "" {
		sa.Annotations = map[string]string{RoleARNAnnotation: role}
	}
	return sa
}

// countGets counts the clientset's service account Gets.
func countGets(c *fake.Clientset) *atomic.Int64 {
	var n atomic.Int64
	c.PrependReactor("get", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil
	})
	return &n
}

func TestKubeServiceAccountsCache(t *testing.T) {
	c := fake.NewClientset(serviceAccount("ns", "app", roleA), serviceAccount("ns", "other", roleB))
	gets := countGets(c)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	k := newKubeServiceAccounts(kubeclienttest.Wrap(c), time.Minute, clk)

	for _, tc := range []struct {
		name  string
		step  time.Duration
		sa    string
		want  string
		reads int64
	}{
		{name: "first read", sa: "app", want: roleA, reads: 1},
		{name: "within ttl", step: 59 * time.Second, sa: "app", want: roleA, reads: 1},
		{name: "other service account", sa: "other", want: roleB, reads: 2},
		{name: "after ttl", step: time.Second, sa: "app", want: roleA, reads: 3},
	} {
		clk.SetTime(clk.Now().Add(tc.step))
		got, err := k.RoleARN(t.Context(), "ns", tc.sa)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: RoleARN = %q, want %q", tc.name, got, tc.want)
		}
		if n := gets.Load(); n != tc.reads {
			t.Errorf("%s: Gets = %d, want %d", tc.name, n, tc.reads)
		}
	}
}

func TestKubeServiceAccountsConcurrent(t *testing.T) {
	c := fake.NewClientset(serviceAccount("ns", "app", roleA))
	gets := countGets(c)
	k := NewKubeServiceAccounts(kubeclienttest.Wrap(c), 0)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got, err := k.RoleARN(t.Context(), "ns", "app"); err != nil || got != roleA {
				t.Errorf("RoleARN = %q, %v; want %q", got, err, roleA)
			}
		})
	}
	wg.Wait()
	// Concurrent misses collapse; at worst a straggler arriving after the
	// shared read finished hits the cache.
	if n := gets.Load(); n != 1 {
		t.Errorf("Gets = %d, want 1", n)
	}
}

func TestKubeServiceAccountsErrors(t *testing.T) {
	c := fake.NewClientset(serviceAccount("ns", "bare", ""))
	gets := countGets(c)
	k := NewKubeServiceAccounts(kubeclienttest.Wrap(c), time.Hour)

	_, err := k.RoleARN(t.Context(), "ns", "bare")
	if !errors.Is(err, ErrMissingRoleARN) {
		t.Fatalf("missing annotation: err = %v, want ErrMissingRoleARN", err)
	}
	for _, want := range []string{"ns/bare", RoleARNAnnotation} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	_, err = k.RoleARN(t.Context(), "ns", "absent")
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "ns/absent") {
		t.Fatalf("absent service account: err = %v, want NotFound naming ns/absent", err)
	}

	// Errors are not cached: the fix is seen on the next mount attempt.
	if _, err := c.CoreV1().ServiceAccounts("ns").Update(t.Context(),
		serviceAccount("ns", "bare", roleA), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := gets.Load()
	got, err := k.RoleARN(t.Context(), "ns", "bare")
	if err != nil || got != roleA {
		t.Fatalf("after annotating: RoleARN = %q, %v; want %q", got, err, roleA)
	}
	if gets.Load() != before+1 {
		t.Errorf("Gets after a failure = %d, want %d", gets.Load(), before+1)
	}
}
