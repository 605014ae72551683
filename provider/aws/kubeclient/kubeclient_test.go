package kubeclient_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	limiter := cs.RateLimiter()
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

// TestReads: the client reads core/v1 objects from an API server, and an
// API server's NotFound Status stays an apierrors NotFound.
func TestReads(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/ns/serviceaccounts/app":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"app","namespace":"ns",`+
				`"annotations":{"eks.amazonaws.com/role-arn":"arn:aws:iam::123456789012:role/app"}}}`)
		case "/api/v1/nodes/n1":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"topology.kubernetes.io/region":"eu-west-1"}}}`)
		case "/api/v1/namespaces/ns/pods/p":
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns"},"spec":{"nodeName":"n1"}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := kubeclient.ForConfig(&rest.Config{Host: srv.URL}, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := c.GetServiceAccount(t.Context(), "ns", "app")
	if err != nil || sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::123456789012:role/app" {
		t.Errorf("GetServiceAccount = %v, %v", sa, err)
	}
	n, err := c.GetNode(t.Context(), "n1")
	if err != nil || n.Labels["topology.kubernetes.io/region"] != "eu-west-1" {
		t.Errorf("GetNode = %v, %v", n, err)
	}
	p, err := c.GetPod(t.Context(), "ns", "p")
	if err != nil || p.Spec.NodeName != "n1" {
		t.Errorf("GetPod = %v, %v", p, err)
	}
	if _, err := c.GetServiceAccount(t.Context(), "ns", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing service account: %v, want NotFound", err)
	}
}
