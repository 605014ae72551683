//go:build integration

package synchash_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/keymount/keymount/controller/synchash"
	"github.com/keymount/keymount/tests/k8senv"
)

// TestKeyCreationRace: two replicas (separate clients, separate caches)
// both find no key Secret, both create one; one create wins, the other
// gets AlreadyExists and reads the winner's key: both hash alike, and one
// Secret exists. The transport holds each replica after its GET until both
// have read, so the race happens every round.
func TestKeyCreationRace(t *testing.T) {
	// Own control plane: the package's only one (Shared would save nothing).
	env := k8senv.Start(t, k8senv.Options{})
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	gate := &getGate{t: t, waiting: map[string]*meeting{}}
	replica := func() *kubernetes.Clientset {
		cfg := rest.CopyConfig(env.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &gatedTransport{rt: rt, gate: gate} })
		return kubernetes.NewForConfigOrDie(cfg)
	}
	a, b := replica(), replica()
	content := &synchash.Content{Type: "Opaque", Data: map[string][]byte{"k": []byte("v")}}
	for round := range 5 {
		ns := fmt.Sprintf("hash-key-%d", round)
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		gate.expect(ns, 2)
		sums := make([]string, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, cs := range []*kubernetes.Clientset{a, b} {
			wg.Go(func() {
				s, err := synchash.NewKeySource(cs.CoreV1(), ns)
				if err == nil {
					var h *synchash.Hasher
					if h, err = s.Hasher(ctx); err == nil {
						sums[i] = h.Sum(content)
					}
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if sums[0] != sums[1] {
			t.Errorf("round %d: the replicas use different keys", round)
		}
		list, err := admin.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Name != synchash.KeySecretName {
			t.Errorf("round %d: %d Secrets, want only %s", round, len(list.Items), synchash.KeySecretName)
			continue
		}
		h, err := synchash.New(list.Items[0].Data[synchash.KeySecretDataKey])
		if err != nil {
			t.Fatal(err)
		}
		if h.Sum(content) != sums[0] {
			t.Errorf("round %d: the replicas' key is not the Secret's", round)
		}
	}
	if created, conflicts := gate.creates(); created != 5 || conflicts != 5 {
		t.Errorf("%d key Secrets created and %d creates refused AlreadyExists, want 5 and 5 (the race ran each round)", created, conflicts)
	}
}

// getGate makes the first GETs of the key Secret in a namespace wait for
// each other, and counts the creates' outcomes.
type getGate struct {
	t       *testing.T
	mu      sync.Mutex
	waiting map[string]*meeting
	created int
	refused int
}

// meeting is released when its last expected GET arrives.
type meeting struct {
	remaining int
	all       chan struct{}
}

func (g *getGate) expect(ns string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[ns] = &meeting{remaining: n, all: make(chan struct{})}
}

// arrive waits until the expected GETs in ns have all arrived; later GETs
// (the loser's read of the winner's key) pass.
func (g *getGate) arrive(ns string) {
	g.mu.Lock()
	m := g.waiting[ns]
	if m != nil {
		m.remaining--
		if m.remaining == 0 {
			close(m.all)
			delete(g.waiting, ns)
		}
	}
	g.mu.Unlock()
	if m == nil {
		return
	}
	select {
	case <-m.all:
	case <-g.t.Context().Done():
	}
}

func (g *getGate) record(code int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch code {
	case http.StatusCreated:
		g.created++
	case http.StatusConflict:
		g.refused++
	}
}

func (g *getGate) creates() (created, refused int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.created, g.refused
}

type gatedTransport struct {
	rt   http.RoundTripper
	gate *getGate
}

func (tr *gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := tr.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	// /api/v1/namespaces/<ns>/secrets[/<name>]
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) < 5 || parts[2] != "namespaces" || parts[4] != "secrets" {
		return resp, nil
	}
	switch {
	case req.Method == http.MethodGet && len(parts) == 6 && parts[5] == synchash.KeySecretName:
		tr.gate.arrive(parts[3])
	case req.Method == http.MethodPost:
		tr.gate.record(resp.StatusCode)
	}
	return resp, nil
}
