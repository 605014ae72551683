package driver

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/internal/panics"
	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/rotation"
	"github.com/keymount/keymount/tests/poll"
)

// armed is a panic a test sets off once, in a handler of its choice.
type armed struct{ set atomic.Value } // of string: where to panic next

func (a *armed) arm(where string) { a.set.Store(where) }

// fire panics once if armed for where.
func (a *armed) fire(where string) {
	if a.set.CompareAndSwap(where, "") {
		panic("injected bug in the " + where)
	}
}

// panickyPolicy refreshes on every trigger, panicking when armed.
type panickyPolicy struct{ a *armed }

func (p panickyPolicy) Decide(rotation.State, string, string, string, time.Time) rotation.Decision {
	p.a.fire("decision")
	return rotation.Decision{Verdict: rotation.DecisionTriggered}
}

func (p panickyPolicy) Current(string, string, string) (rotation.Triggers, []error) {
	return rotation.Triggers{}, nil
}

// panickyCluster records writes, panicking in AfterPublish when armed.
type panickyCluster struct {
	NoCluster
	a  *armed
	mu sync.Mutex
	n  int // AfterPublish calls that returned
}

func (c *panickyCluster) AfterPublish(context.Context, *Outcome) error {
	c.a.fire("reporter")
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

func (c *panickyCluster) written() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// recoveredPanics reads keymount_panics_recovered_total{handler}.
func recoveredPanics(t *testing.T, handler string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(panics.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "handler" && l.GetValue() == handler {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no keymount_panics_recovered_total{handler=%q}", handler)
	return 0
}

// TestBackgroundPanicsKeepServing injects a panic in each kind of handler
// the driver runs outside a CSI call — the refresh decision of a trigger,
// the triggered refresh (its provider call), the reporter's status write —
// and checks each is recovered and counted, that the volume's lock and
// trigger state are released, and that the driver still serves publishes
// afterwards. (Informer handlers: internal/kube's integration test.)
func TestBackgroundPanicsKeepServing(t *testing.T) {
	a := &armed{}
	a.arm("")
	clk := clocktesting.NewFakeClock(time.Now())
	cl := &panickyCluster{a: a}
	s := serveNodeWith(t, func(d *Deps) {
		d.Providers = funcProvider(func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			a.fire("refresh")
			return okResponse(&v1alpha1.File{Path: "a", Contents: []byte("x")}), nil
		})
		d.Cluster, d.Refresh, d.TriggerClock = cl, panickyPolicy{a: a}, clk
	})
	req := s.request("held")
	if _, err := s.node.NodePublishVolume(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, "the first status write", func() bool { return cl.written() >= 1 })

	servesPublishes := func(name string) {
		t.Helper()
		r := s.request(name)
		if _, err := s.node.NodePublishVolume(t.Context(), r); err != nil {
			t.Fatalf("publish after the %s panicked: %v (the driver must keep serving)", name, err)
		}
		if err := s.unpublish(t.Context(), r); err != nil {
			t.Fatalf("unpublish after the %s panicked: %v", name, err)
		}
	}
	for _, tc := range []struct{ where, handler string }{
		{"decision", panics.Trigger},
		{"refresh", panics.Trigger},
		{"reporter", panics.Reporter},
	} {
		before := recoveredPanics(t, tc.handler)
		writes := cl.written()
		a.arm(tc.where)
		clk.Step(DefaultMinRefreshInterval) // the trigger runs at once, not deferred
		s.d.TriggerClass("shop", "app")
		poll.UntilTrue(t, "the panic in the "+tc.where+" to be recovered", func() bool {
			return recoveredPanics(t, tc.handler) == before+1
		})
		poll.UntilTrue(t, "the triggered refresh to finish", func() bool {
			s.d.held.mu.Lock()
			defer s.d.held.mu.Unlock()
			r := s.d.held.m[req.GetVolumeId()]
			return r != nil && !r.running && !r.pending && r.timer == nil
		})
		if tc.where == "reporter" {
			// The write that panicked is retried, and succeeds.
			poll.UntilTrue(t, "the status write to be retried", func() bool { return cl.written() > writes && s.d.reporter.idle() })
		}
		// The volume's lock was released: kubelet's republish goes through.
		if _, err := s.node.NodePublishVolume(t.Context(), req); err != nil {
			t.Fatalf("republish after the %s panicked: %v", tc.where, err)
		}
		servesPublishes(tc.where)
	}
	if err := s.unpublish(t.Context(), req); err != nil {
		t.Fatal(err)
	}
}
