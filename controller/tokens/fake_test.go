package tokens

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// t0 is the fake clock's start.
var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// tokenAPI answers TokenRequests on a fake clientset like the API server:
// a fresh token per request, valid for the requested seconds from the fake
// clock's now. It counts requests and can fail or hold them.
type tokenAPI struct {
	clk *clocktesting.FakeClock

	mu       sync.Mutex
	requests []tokenCall
	fail     error         // returned instead of a token while set
	hold     chan struct{} // a request waits for it to close while set
	entered  chan struct{} // receives once per request entering, while set
}

// tokenCall is one TokenRequest the fake saw.
type tokenCall struct {
	namespace, name string
	spec            authenticationv1.TokenRequestSpec
	token           string
}

func newTokenAPI(t *testing.T) (*fake.Clientset, *tokenAPI) {
	t.Helper()
	api := &tokenAPI{clk: clocktesting.NewFakeClock(t0)}
	cs := fake.NewClientset()
	cs.PrependReactor("create", "serviceaccounts", api.react)
	return cs, api
}

func (a *tokenAPI) react(action k8stesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "token" {
		return false, nil, nil
	}
	ca, ok := action.(k8stesting.CreateActionImpl)
	if !ok {
		return true, nil, errors.New("not a create action")
	}
	in, ok := ca.GetObject().(*authenticationv1.TokenRequest)
	if !ok {
		return true, nil, errors.New("not a TokenRequest")
	}
	tr := in.DeepCopy()
	a.mu.Lock()
	hold, entered, fail := a.hold, a.entered, a.fail
	a.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if hold != nil {
		<-hold
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	call := tokenCall{namespace: ca.GetNamespace(), name: ca.Name, spec: tr.Spec}
	if fail != nil {
		a.requests = append(a.requests, call)
		return true, nil, fail
	}
	call.token = fmt.Sprintf("secret-token-%s-%s-%s-%d", call.namespace, call.name, audienceOf(tr), len(a.requests))
	a.requests = append(a.requests, call)
	tr.Status = authenticationv1.TokenRequestStatus{
		Token:               call.token,
		ExpirationTimestamp: metav1.NewTime(a.clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second)),
	}
	return true, tr, nil
}

func audienceOf(tr *authenticationv1.TokenRequest) string {
	if len(tr.Spec.Audiences) == 0 {
		return "default"
	}
	return tr.Spec.Audiences[0]
}

func (a *tokenAPI) calls() []tokenCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]tokenCall(nil), a.requests...)
}

func (a *tokenAPI) count() int { return len(a.calls()) }

func (a *tokenAPI) setFail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = err
}

// holdRequests makes requests wait until the returned func is called;
// entered receives once per request that reached the fake.
func (a *tokenAPI) holdRequests() (entered <-chan struct{}, release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	hold := make(chan struct{})
	ent := make(chan struct{}, 100)
	a.hold, a.entered = hold, ent
	var once sync.Once
	return ent, func() {
		once.Do(func() {
			a.mu.Lock()
			a.hold, a.entered = nil, nil
			a.mu.Unlock()
			close(hold)
		})
	}
}

// tokenSet is a decoded serviceAccount.tokens attribute.
type tokenSet map[string]authenticationv1.TokenRequestStatus

func newManager(t *testing.T, cs *fake.Clientset, api *tokenAPI, cfg Config) *Manager {
	t.Helper()
	cfg.Clock = api.clk
	m, err := NewManager(cs.CoreV1(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
