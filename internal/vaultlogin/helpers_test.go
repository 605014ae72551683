package vaultlogin_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/vaultlogin"
)

// recorder is an Observer that writes down what it is told.
type recorder struct {
	mu     sync.Mutex
	events []string
}

var _ vaultlogin.Observer = (*recorder)(nil)

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) VaultRequest(op string, failed bool) {
	if failed {
		r.add(op + " failed")
		return
	}
	r.add(op)
}

func (r *recorder) LoggedIn(l *vaultlogin.Login, s *vaultlogin.Session) {
	r.add(fmt.Sprintf("logged in as %s (ttl %s, renewable %t)", l.Identity().Role, s.TTL(), s.Renewable()))
}

func (r *recorder) RenewFailed(l *vaultlogin.Login, err error) {
	r.add("renewing " + l.Identity().Role + " failed")
}

func (r *recorder) RevokeFailed(l *vaultlogin.Login, err error) {
	r.add("revoking " + l.Identity().Role + " failed")
}

// take returns what r was told since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.events)
	r.events = nil
	return out
}

// rig is a Cache on a fake clock with a recorder.
type rig struct {
	clock *clocktesting.FakePassiveClock
	obs   *recorder
	cache *vaultlogin.Cache
}

func newRig(policy vaultlogin.Policy, margin time.Duration) *rig {
	r := &rig{clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), obs: &recorder{}}
	r.cache = vaultlogin.New(vaultlogin.Config{Policy: policy, Margin: margin, Clock: r.clock, Observer: r.obs})
	return r
}

func (r *rig) step(d time.Duration) { r.clock.SetTime(r.clock.Now().Add(d)) }

// issuer answers logins with tokens t1, t2, … of one TTL.
type issuer struct {
	ttl       time.Duration
	renewable bool

	mu sync.Mutex
	n  int
}

func (is *issuer) logIn(context.Context, *vaultapi.Client) (*vaultapi.Secret, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.n++
	return &vaultapi.Secret{Auth: &vaultapi.SecretAuth{ClientToken: fmt.Sprintf("t%d", is.n),
		LeaseDuration: int(is.ttl.Seconds()), Renewable: is.renewable}}, nil
}

func (is *issuer) logins() int {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.n
}

// deadVault is a client of an address nothing listens on: every request
// to it fails at once (connection refused), never retried.
func deadVault(t *testing.T) *vaultapi.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := vaultapi.DefaultConfig()
	cfg.Address = "http://" + addr
	cfg.MaxRetries = 0
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.ClearToken()
	c.ClearNamespace()
	return c
}

// session is l's Session, the test failing on an error.
func session(t *testing.T, l *vaultlogin.Login, base *vaultapi.Client, logIn vaultlogin.LogInFunc) *vaultlogin.Session {
	t.Helper()
	s, err := l.Session(t.Context(), base, logIn)
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	return s
}
