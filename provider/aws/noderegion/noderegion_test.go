package noderegion

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/keymount/keymount/provider/aws/kubeclient/kubeclienttest"
	"github.com/keymount/keymount/provider/server"
)

func node(name, region string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	if region != "" {
		n.Labels[Label] = region
	}
	return n
}

func pod(namespace, name, nodeName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: corev1.PodSpec{NodeName: nodeName}}
}

// gets counts the GET requests of a resource the fake client served.
func gets(c *fake.Clientset, resource string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

func TestConfiguredRegionWins(t *testing.T) {
	c := fake.NewClientset(node("n1", "eu-west-1"), pod("ns", "p", "n1"))
	r := New(Config{Region: "us-east-2", NodeName: "n1"}, kubeclienttest.Wrap(c))
	got, err := r.DefaultRegion(t.Context(), "ns", "p")
	if err != nil || got != "us-east-2" {
		t.Fatalf("DefaultRegion = %q, %v; want us-east-2 (the configured region, as the existing provider prefers AWS_REGION)", got, err)
	}
	if len(c.Actions()) != 0 {
		t.Errorf("API requests with a configured region: %v", c.Actions())
	}
	if got, err := New(Config{Region: "us-east-2"}, nil).DefaultRegion(t.Context(), "", ""); err != nil || got != "us-east-2" {
		t.Errorf("without a client: %q, %v", got, err)
	}
}

func TestOwnNodeReadOnce(t *testing.T) {
	c := fake.NewClientset(node("n1", "eu-west-1"))
	r := New(Config{NodeName: "n1"}, kubeclienttest.Wrap(c))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			got, err := r.DefaultRegion(t.Context(), "ns", "p")
			if err != nil || got != "eu-west-1" {
				t.Errorf("DefaultRegion = %q, %v", got, err)
			}
		})
	}
	wg.Wait()
	if _, err := r.DefaultRegion(t.Context(), "", ""); err != nil {
		t.Errorf("without pod info: %v", err)
	}
	if n := gets(c, "nodes"); n != 1 {
		t.Errorf("node read %d times, want once", n)
	}
	if n := gets(c, "pods"); n != 0 {
		t.Errorf("pods read %d times with the node name known", n)
	}
}

func TestNodeOfThePod(t *testing.T) {
	c := fake.NewClientset(node("n1", "eu-west-1"), node("n2", "ap-south-1"),
		pod("ns", "a", "n1"), pod("ns", "b", "n1"), pod("other", "c", "n2"))
	r := New(Config{}, kubeclienttest.Wrap(c))
	for _, tc := range []struct{ ns, pod, want string }{
		{"ns", "a", "eu-west-1"}, {"ns", "b", "eu-west-1"}, {"other", "c", "ap-south-1"}, {"ns", "a", "eu-west-1"},
	} {
		got, err := r.DefaultRegion(t.Context(), tc.ns, tc.pod)
		if err != nil || got != tc.want {
			t.Errorf("pod %s/%s: %q, %v; want %q", tc.ns, tc.pod, got, err, tc.want)
		}
	}
	if n := gets(c, "pods"); n != 4 {
		t.Errorf("pods read %d times, want once per mount (4)", n)
	}
	if n := gets(c, "nodes"); n != 2 {
		t.Errorf("nodes read %d times, want once per node (2)", n)
	}
}

func TestMissingLabelIsNotRemembered(t *testing.T) {
	c := fake.NewClientset(node("n1", ""))
	r := New(Config{NodeName: "n1"}, kubeclienttest.Wrap(c))
	_, err := r.DefaultRegion(t.Context(), "ns", "p")
	wantErr(t, err, server.ErrFailedPrecondition, "node n1 has no topology.kubernetes.io/region label", "parameters.region", "--region")

	if _, err := c.CoreV1().Nodes().Update(t.Context(), node("n1", "eu-central-1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := r.DefaultRegion(t.Context(), "ns", "p")
	if err != nil || got != "eu-central-1" {
		t.Errorf("after labelling: %q, %v", got, err)
	}
}

func TestErrors(t *testing.T) {
	forbidden := func(resource string) k8stesting.ReactionFunc {
		return func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "x", errors.New("RBAC"))
		}
	}
	unavailable := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("apiserver is shutting down")
	}
	tests := []struct {
		name    string
		cfg     Config
		react   map[string]k8stesting.ReactionFunc
		objects []runtime.Object
		pod     string
		want    error
		msg     []string
	}{
		{name: "no client", pod: "p", want: server.ErrFailedPrecondition, msg: []string{"set parameters.region"}},
		{name: "no pod name", cfg: Config{}, pod: "", want: server.ErrFailedPrecondition, msg: []string{"podInfoOnMount", "NODE_NAME"}},
		{name: "pods forbidden", react: map[string]k8stesting.ReactionFunc{"pods": forbidden("pods")}, pod: "p",
			want: server.ErrFailedPrecondition, msg: []string{"reading pod ns/p for its node", "forbidden", "NODE_NAME"}},
		{name: "nodes forbidden", cfg: Config{NodeName: "n1"}, react: map[string]k8stesting.ReactionFunc{"nodes": forbidden("nodes")}, pod: "p",
			want: server.ErrFailedPrecondition, msg: []string{"reading node n1", "forbidden", "--region"}},
		{name: "pod gone", objects: []runtime.Object{node("n1", "eu-west-1")}, pod: "p",
			want: server.ErrFailedPrecondition, msg: []string{`pods "p" not found`}},
		{name: "pod not scheduled", objects: []runtime.Object{pod("ns", "p", "")}, pod: "p",
			want: server.ErrFailedPrecondition, msg: []string{"not scheduled"}},
		{name: "API server unavailable", cfg: Config{NodeName: "n1"}, react: map[string]k8stesting.ReactionFunc{"nodes": unavailable}, pod: "p",
			want: server.ErrUnavailable, msg: []string{"shutting down"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r *Resolver
			if tc.name == "no client" {
				r = New(tc.cfg, nil)
			} else {
				c := fake.NewClientset(tc.objects...)
				for resource, fn := range tc.react {
					c.PrependReactor("get", resource, fn)
				}
				r = New(tc.cfg, kubeclienttest.Wrap(c))
			}
			_, err := r.DefaultRegion(t.Context(), "ns", tc.pod)
			wantErr(t, err, tc.want, tc.msg...)
		})
	}
}

func TestCallerContext(t *testing.T) {
	c := fake.NewClientset(node("n1", "eu-west-1"))
	block := make(chan struct{})
	c.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-block
		return false, nil, nil
	})
	r := New(Config{NodeName: "n1"}, kubeclienttest.Wrap(c))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.DefaultRegion(ctx, "ns", "p"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled caller: %v", err)
	}
	close(block)
	// The read the canceled caller started still serves the next one.
	if got, err := r.DefaultRegion(t.Context(), "ns", "p"); err != nil || got != "eu-west-1" {
		t.Errorf("next caller: %q, %v", got, err)
	}
}

func wantErr(t *testing.T, err, kind error, subs ...string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error = %v, want one matching %v", err, kind)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %q: %v", s, err)
		}
	}
}
