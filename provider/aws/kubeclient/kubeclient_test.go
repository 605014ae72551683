package kubeclient_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/provider/aws/kubeclient"
)

// TestDefaultsReachTheClient: the clientset's limiter is built from the
// flags' defaults, not client-go's (5 a second, 10 at once): a cold start of
// DefaultBurst new identities gets a token each without waiting.
func TestDefaultsReachTheClient(t *testing.T) {
	rc := &rest.Config{Host: "http://127.0.0.1:1", QPS: 5, Burst: 10}
	cs, err := kubeclient.ForConfig(rc, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	if err != nil {
		t.Fatal(err)
	}
	limiter := cs.CoreV1().RESTClient().GetRateLimiter()
	if limiter == nil {
		t.Fatal("no rate limiter")
	}
	if got := limiter.QPS(); got != kubeclient.DefaultQPS {
		t.Errorf("QPS = %v, want %v", got, kubeclient.DefaultQPS)
	}
	for i := range kubeclient.DefaultBurst {
		if !limiter.TryAccept() {
			t.Fatalf("request %d of a burst of %d had to wait", i+1, kubeclient.DefaultBurst)
		}
	}
	if rc.QPS != 5 || rc.Burst != 10 {
		t.Errorf("ForConfig changed the caller's config: QPS %v burst %d", rc.QPS, rc.Burst)
	}
}

func TestRejectsNonPositiveLimits(t *testing.T) {
	for _, tt := range []struct {
		qps   float64
		burst int
	}{{0, 10}, {-1, 10}, {10, 0}} {
		if _, err := kubeclient.ForConfig(&rest.Config{Host: "http://127.0.0.1:1"}, tt.qps, tt.burst); err == nil {
			t.Errorf("qps %v burst %d: no error", tt.qps, tt.burst)
		}
	}
	if _, err := kubeclient.New(kubeclient.Config{Kubeconfig: "/nonexistent", QPS: 0, Burst: 1}); err == nil {
		t.Error("New with qps 0: no error")
	}
}
