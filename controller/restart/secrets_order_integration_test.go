//go:build integration

package restart_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/keymount/keymount/controller/restart"
	"github.com/keymount/keymount/controller/secretsync"
	"github.com/keymount/keymount/internal/kube"
	"github.com/keymount/keymount/tests/poll"
)

// The Secret reconciler learns a synced Secret's content from the cache's
// transform (SecretDigests.Record), which client-go runs as the informer
// queues an event, before the cache's store holds the object and before
// any handler hears of it. These tests put the events in the orders a
// loaded machine produces, by holding one step until another happened,
// never by timing.

// orderedController is keymount-controller's way of running the Secret
// reconciler (the SecretSync reconciler's cache, digests recorded by its
// transform), with two holds the tests control.
type orderedController struct {
	mu sync.Mutex
	// recorded are the password values of Secret watched the transform
	// recorded, in order.
	recorded []string
	watched  types.NamespacedName
	// hold, when set, runs in the transform after the Record of
	// watched's next content, before the cache's store gets it.
	hold func(value string)
	// workloads is closed to let the workload cache list Deployments
	// (and so the reconciler's workers start).
	workloads chan struct{}
	// reads is the Secret cache the reconciler reads.
	reads *watchedReads
}

func (o *orderedController) record(d *restart.SecretDigests) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		d.Record(s)
		if s.Namespace != o.watched.Namespace || s.Name != o.watched.Name || len(s.ManagedFields) == 0 {
			return
		}
		v := string(s.Data["password"])
		o.mu.Lock()
		o.recorded = append(o.recorded, v)
		hold := o.hold
		o.hold = nil
		o.mu.Unlock()
		if hold != nil {
			hold(v)
		}
	}
}

// hasRecorded reports whether the transform recorded value for watched.
func (o *orderedController) hasRecorded(value string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range o.recorded {
		if v == value {
			return true
		}
	}
	return false
}

// holdWorkloads lets every request through but the workload cache's list
// of Deployments, which waits until o.workloads is closed.
func (o *orderedController) holdWorkloads(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && req.URL.Path == "/apis/apps/v1/deployments" && !isWatch(req.URL) {
			select {
			case <-o.workloads:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return next.RoundTrip(req)
	})
}

func isWatch(u *url.URL) bool { return u.Query().Get("watch") == "true" }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// start runs the controller until the test ends.
func (o *orderedController) start(t *testing.T, cfg *rest.Config) {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(o.holdWorkloads)
	scheme, err := kube.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	digests := restart.NewSecretDigests(testHashKey)
	cacheOpts, err := secretsync.CacheOptions(o.record(digests))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: cacheOpts,
	})
	if err != nil {
		t.Fatal(err)
	}
	o.reads = &watchedReads{Cache: mgr.GetCache(), watched: o.watched}
	opts := restart.Options{HashKey: testHashKey, SecretCache: o.reads, SecretDigests: digests}
	if err := restart.SetupWithManager(t.Context(), mgr, opts); err != nil {
		t.Fatalf("SetupWithManager: %v", err)
	}
	runManager(t, mgr)
}

// afterSecond waits for the second after tm (what names it): changes
// and creations are dated to the second.
func afterSecond(t *testing.T, what string, tm time.Time) {
	t.Helper()
	poll.UntilTrue(t, "a second after "+what, func() bool {
		return time.Now().Truncate(time.Second).After(tm)
	})
}

// TestSecretRestartChangeBeforeFirstReconcile: the synced Secret is
// created and then changed before the reconciler first looks at it (its
// workers start only when every cache synced; under load a queue runs
// late, and the two events are one request by then). The Deployment whose
// pods started with the first content is restarted for the second: the
// first content the cache recorded is the baseline, not the content the
// reconciler happens to find first.
func TestSecretRestartChangeBeforeFirstReconcile(t *testing.T) {
	a := startAPIWithCRDs(t)
	f := &secretFixture{a: a, ns: a.namespace(t)}
	f.secret(t, "canary", true, "canary-0")
	f.consumer(t, "canary", "canary", "env", true)
	f.secret(t, "db-creds", true, "v1")
	app := f.consumer(t, "app", "db-creds", "envFrom", true)
	o := &orderedController{watched: types.NamespacedName{Namespace: f.ns, Name: "db-creds"}, workloads: make(chan struct{})}
	o.start(t, a.env.Config)

	poll.UntilTrue(t, "the cache recorded v1", func() bool { return o.hasRecorded("v1") })
	f.setSecret(t, "db-creds", "v2")
	poll.UntilTrue(t, "the cache recorded v2", func() bool { return o.hasRecorded("v2") })
	close(o.workloads) // now the reconciler's workers start

	// Waited for, not ordered by a canary: controller-runtime's priority
	// queue hands the requests of a cache's initial list (this Secret's)
	// out after later events (a canary's change).
	key := restart.SecretAnnotationKey("db-creds")
	err := poll.Wait(t.Context(), 90*time.Second, func(context.Context) (bool, error) {
		return f.get(t, "app").Spec.Template.Annotations[key] == value("v2"), nil
	})
	f.roundTrip(t) // and nothing restarts it twice
	if got := f.get(t, "app"); err != nil || got.Spec.Template.Annotations[key] != value("v2") || got.Generation != app.Generation+1 {
		t.Errorf("the Deployment whose pods read v1: generation %d (was %d), template annotations %v; want restarted once for v2 (%s=%s)",
			got.Generation, app.Generation, got.Spec.Template.Annotations, key, value("v2"))
	}
}

// TestSecretRestartReconcileBeforeTheCacheHasIt: a consumer's event
// reconciles the Secret after the transform recorded its creation but
// before the cache's store holds it (the reconciler reads NotFound). That
// read must not drop what the transform recorded: the Secret's later
// change restarts the Deployment.
func TestSecretRestartReconcileBeforeTheCacheHasIt(t *testing.T) {
	a := startAPIWithCRDs(t)
	f := &secretFixture{a: a, ns: a.namespace(t)}
	f.secret(t, "canary", true, "canary-0")
	f.consumer(t, "canary", "canary", "env", true)
	f.consumer(t, "app", "db-creds", "envFrom", true)
	o := &orderedController{watched: types.NamespacedName{Namespace: f.ns, Name: "db-creds"}, workloads: make(chan struct{})}
	close(o.workloads)
	o.start(t, a.env.Config)
	f.roundTrip(t) // synced and idle

	// Held in the transform of the Secret's creation: a change of the
	// Deployment that consumes it makes the reconciler read the Secret,
	// which the cache does not hold yet; the transform goes on once the
	// reconciler read NotFound.
	held := make(chan error, 1)
	o.mu.Lock()
	o.hold = func(string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		notFound := o.reads.arm()
		patch := []byte(`{"metadata":{"labels":{"touched":"1"}}}`)
		_, err := a.admin.AppsV1().Deployments(f.ns).Patch(ctx, "app", types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			select {
			case <-notFound:
			case <-ctx.Done():
				err = errors.New("the reconciler never read the Secret while the transform held it")
			}
		}
		held <- err
	}
	o.mu.Unlock()
	f.secret(t, "db-creds", true, "v1")
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	f.roundTrip(t)

	f.setSecret(t, "db-creds", "v2")
	poll.UntilTrue(t, "the cache recorded v2", func() bool { return o.hasRecorded("v2") })
	key := restart.SecretAnnotationKey("db-creds")
	_ = poll.Wait(t.Context(), 90*time.Second, func(context.Context) (bool, error) {
		return f.get(t, "app").Spec.Template.Annotations[key] == value("v2"), nil
	})
	if got := f.get(t, "app").Spec.Template.Annotations[key]; got != value("v2") {
		t.Errorf("the Deployment whose pods read v1: template annotation %s=%q, want %q (restarted for v2)", key, got, value("v2"))
	}
}

// watchedReads is the Secret cache as the reconciler reads it, telling
// when a read of one Secret finds nothing.
type watchedReads struct {
	cache.Cache
	watched types.NamespacedName

	mu       sync.Mutex
	notFound chan struct{}
}

// arm returns a channel closed at the next read of watched that finds
// nothing.
func (r *watchedReads) arm() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notFound = make(chan struct{})
	return r.notFound
}

func (r *watchedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Cache.Get(ctx, key, obj, opts...)
	if key == r.watched && apierrors.IsNotFound(err) {
		r.mu.Lock()
		if r.notFound != nil {
			close(r.notFound)
			r.notFound = nil
		}
		r.mu.Unlock()
	}
	return err
}
