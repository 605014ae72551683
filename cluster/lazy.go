package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/cluster/secretobjects"
	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/driver/volume"
	"github.com/keymount/keymount/internal/panics"
	"github.com/keymount/keymount/rotation"
)

// errNotConnected fails what needs the API server before the driver has
// connected to it; the reporter retries such writes with backoff.
var errNotConnected = fmt.Errorf("%w: not connected to the API server yet", driver.ErrAPIUnavailable)

// connectRetry bounds the wait between attempts to connect.
const connectRetry = 30 * time.Second

// Lazy is the cluster side of a driver that serves kubelet before
// it has connected to the API server: the socket opens at once, unpublish
// and republish of recorded volumes work while the API server is slow or
// down, and what needs it waits for the connection (class reads, under the
// caller's deadline) or is retried (status writes).
type Lazy struct {
	ctx   context.Context
	ready chan struct{} // closed once cl is set
	cl    *Cluster
}

var (
	_ driver.Cluster  = (*Lazy)(nil)
	_ class.Resolver  = (*Lazy)(nil)
	_ rotation.Source = (*Lazy)(nil)
)

// HandleTriggers hands the cluster's refresh triggers to h once connected.
func (d *Lazy) HandleTriggers(h TriggerHandler, node rotation.NodeDefaults) {
	go func() {
		cl, err := d.await()
		if err != nil {
			return
		}
		if err := cl.HandleTriggers(h, node); err != nil {
			klog.ErrorS(err, "watching refresh triggers; triggers act at the next republish")
		}
	}()
}

// ClassAnnotations returns keymount's annotations of a cached class, none
// before the driver has connected: the node's defaults apply.
func (d *Lazy) ClassAnnotations(namespace, name string) map[string]string {
	if cl, err := d.ifConnected(); err == nil {
		return cl.ClassAnnotations(namespace, name)
	}
	return nil
}

// PodAnnotations returns keymount's annotations of a cached pod, none
// before the driver has connected.
func (d *Lazy) PodAnnotations(namespace, name string) map[string]string {
	if cl, err := d.ifConnected(); err == nil {
		return cl.PodAnnotations(namespace, name)
	}
	return nil
}

// startRecovered starts the cluster side; a panic in it is an error to retry.
func startRecovered(ctx context.Context, cfg Config) (cl *Cluster, err error) {
	defer panics.RecoverAs(panics.Sweep, "connecting to the API server", &err)
	return Start(ctx, cfg)
}

// ConnectInBackground starts connecting to the API server, retrying with
// backoff until it succeeds or ctx ends, and returns at once.
// writes, when not nil, hears the Secrets the sync writes.
func ConnectInBackground(ctx context.Context, cfg Config, writes secretobjects.WriteObserver) *Lazy {
	return connectWith(ctx, func(ctx context.Context) (*Cluster, error) { return startRecovered(ctx, cfg) }, writes)
}

// connectWith is ConnectInBackground with the start of the cluster side
// given (tests choose it).
func connectWith(ctx context.Context, start func(context.Context) (*Cluster, error), writes secretobjects.WriteObserver) *Lazy {
	d := &Lazy{ctx: ctx, ready: make(chan struct{})}
	go func() {
		wait := 200 * time.Millisecond
		for {
			cl, err := start(ctx)
			if err == nil {
				if writes != nil {
					cl.ObserveSecretWrites(writes)
				}
				d.cl = cl
				close(d.ready)
				return
			}
			klog.ErrorS(err, "connecting to the API server, will retry", "in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, connectRetry)
		}
	}()
	return d
}

// await returns the cluster once connected, however long that takes, or
// an error when the driver stops first.
func (d *Lazy) await() (*Cluster, error) {
	select {
	case <-d.ready:
		return d.cl, nil
	case <-d.ctx.Done():
		return nil, errNotConnected
	}
}

// connectWait bounds how long a call that needs the API server waits for
// the connection: the caller gets Unavailable (and retries) before its own
// deadline, never a DeadlineExceeded that says nothing of why.
const connectWait = 5 * time.Second

// connected returns the cluster once connected, or an error when it is not
// within connectWait, half of what is left of ctx, or ctx ends first.
func (d *Lazy) connected(ctx context.Context) (*Cluster, error) {
	select {
	case <-d.ready:
		return d.cl, nil
	default:
	}
	wait := connectWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-d.ready:
		return d.cl, nil
	case <-t.C:
		return nil, fmt.Errorf("%w (waited %s)", errNotConnected, wait.Round(time.Millisecond))
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errNotConnected, context.Cause(ctx))
	case <-d.ctx.Done():
		return nil, errNotConnected
	}
}

// Notify records the events of an outcome once connected; it never blocks.
func (d *Lazy) Notify(o *driver.Outcome) {
	select {
	case <-d.ready:
		d.cl.Notify(o)
	default:
		go func() {
			defer panics.Recover(panics.Reporter, "events of a publish")
			if cl, err := d.await(); err == nil {
				cl.Notify(o)
			}
		}()
	}
}

// AfterPublish writes the pod status, failing (to be retried) until connected.
func (d *Lazy) AfterPublish(ctx context.Context, o *driver.Outcome) error {
	cl, err := d.ifConnected()
	if err != nil {
		return err
	}
	return cl.AfterPublish(ctx, o)
}

// SyncMissing writes a first publish's missing Secrets when connected;
// before that, AfterPublish writes them once the connection is up.
func (d *Lazy) SyncMissing(ctx context.Context, o *driver.Outcome) {
	if cl, err := d.ifConnected(); err == nil {
		cl.SyncMissing(ctx, o)
	}
}

// AfterUnpublish removes the pod status, failing (to be retried) until connected.
func (d *Lazy) AfterUnpublish(ctx context.Context, rec *volume.Record) error {
	cl, err := d.ifConnected()
	if err != nil {
		return err
	}
	return cl.AfterUnpublish(ctx, rec)
}

// Synced reports whether the driver is connected and its caches synced.
func (d *Lazy) Synced() bool {
	cl, err := d.ifConnected()
	return err == nil && cl.Synced()
}

// Resolve reads a class, waiting for the connection within ctx.
func (d *Lazy) Resolve(ctx context.Context, namespace, name string) (*secretsstorev1.SecretProviderClass, error) {
	cl, err := d.connected(ctx)
	if err != nil {
		return nil, fmt.Errorf("read secretproviderclass %s/%s: %w", namespace, name, err)
	}
	return cl.Resolver().Resolve(ctx, namespace, name)
}

// UpstreamMounted asks the pod status, waiting for the connection within ctx.
func (d *Lazy) UpstreamMounted(ctx context.Context, podNamespace, podName, className, targetPath string) (bool, error) {
	cl, err := d.connected(ctx)
	if err != nil {
		return false, err
	}
	return cl.UpstreamMounted(ctx, podNamespace, podName, className, targetPath)
}

func (d *Lazy) ifConnected() (*Cluster, error) {
	select {
	case <-d.ready:
		return d.cl, nil
	default:
		return nil, errNotConnected
	}
}
