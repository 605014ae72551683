package noderegion

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"

	"github.com/keymount/keymount/provider/aws/internal/kubeerr"
	"github.com/keymount/keymount/provider/server"
)

// Label is the node label that holds the node's region.
const Label = "topology.kubernetes.io/region"

const (
	// readTimeout bounds one node read, which runs for every mount waiting
	// on it.
	readTimeout = 30 * time.Second
	// maxNodes bounds the regions remembered; a provider serves one node,
	// so this is reached only by a provider that reads pods of many.
	maxNodes = 256
)

// Config configures a Resolver.
type Config struct {
	// Region, when set, is the region of every mount without one, and no
	// node is read.
	Region string
	// NodeName is the node the provider runs on; "" means reading each
	// pod for its node.
	NodeName string
}

// Client reads the pod and node objects the region comes from.
// *kubeclient.Client implements it.
type Client interface {
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// Resolver finds the default region of a mount. It is safe for concurrent
// use.
type Resolver struct {
	cfg    Config
	client Client

	group singleflight.Group

	mu      sync.Mutex
	regions map[string]string // node name -> region
}

// New returns a Resolver that reads pods and nodes through client, which
// may be nil when cfg.Region is set.
func New(cfg Config, client Client) *Resolver {
	return &Resolver{cfg: cfg, client: client, regions: map[string]string{}}
}

// DefaultRegion returns the region of a mount of pod namespace/name whose
// class sets none. Its errors match server.ErrFailedPrecondition when the
// cluster is not set up to tell the region, and server.ErrUnavailable when
// the API server could not answer.
func (r *Resolver) DefaultRegion(ctx context.Context, namespace, pod string) (string, error) {
	if r.cfg.Region != "" {
		return r.cfg.Region, nil
	}
	if r.client == nil {
		return "", fmt.Errorf("%w: the class sets no region and the provider has neither --region nor an API server "+
			"to read the node's %s label; set parameters.region in the SecretProviderClass", server.ErrFailedPrecondition, Label)
	}
	node := r.cfg.NodeName
	if node == "" {
		var err error
		if node, err = r.nodeOf(ctx, namespace, pod); err != nil {
			return "", err
		}
	}
	if region, ok := r.cached(node); ok {
		return region, nil
	}
	ch := r.group.DoChan(node, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
		defer cancel()
		return r.read(rctx, node)
	})
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the region of node %s: %w", node, context.Cause(ctx))
	case res := <-ch:
		if res.Err != nil {
			return "", res.Err
		}
		region, _ := res.Val.(string)
		return region, nil
	}
}

// nodeOf reads the pod for the node it is scheduled on.
func (r *Resolver) nodeOf(ctx context.Context, namespace, pod string) (string, error) {
	if namespace == "" || pod == "" {
		return "", fmt.Errorf("%w: the class sets no region and the volume context lacks the pod's name "+
			"(is podInfoOnMount set on the CSIDriver?); set parameters.region in the SecretProviderClass, "+
			"or NODE_NAME in the provider's environment", server.ErrFailedPrecondition)
	}
	p, err := r.client.GetPod(ctx, namespace, pod)
	if err != nil {
		return "", fmt.Errorf("the class sets no region: reading pod %s/%s for its node: %w (set parameters.region "+
			"in the SecretProviderClass, or NODE_NAME in the provider's environment)", namespace, pod, kubeerr.Classify(err))
	}
	if p.Spec.NodeName == "" {
		return "", fmt.Errorf("%w: the class sets no region and pod %s/%s is not scheduled on a node yet",
			server.ErrFailedPrecondition, namespace, pod)
	}
	return p.Spec.NodeName, nil
}

// read gets the node's region label and remembers it.
func (r *Resolver) read(ctx context.Context, node string) (string, error) {
	if region, ok := r.cached(node); ok {
		return region, nil
	}
	n, err := r.client.GetNode(ctx, node)
	if err != nil {
		return "", fmt.Errorf("the class sets no region: reading node %s for its %s label: %w (set parameters.region "+
			"in the SecretProviderClass, or --region on the provider)", node, Label, kubeerr.Classify(err))
	}
	region := n.Labels[Label]
	if region == "" {
		return "", fmt.Errorf("%w: the class sets no region and node %s has no %s label; set parameters.region "+
			"in the SecretProviderClass, or --region (AWS_REGION) on the provider", server.ErrFailedPrecondition, node, Label)
	}
	r.remember(node, region)
	return region, nil
}

func (r *Resolver) cached(node string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	region, ok := r.regions[node]
	return region, ok
}

func (r *Resolver) remember(node, region string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.regions) >= maxNodes {
		clear(r.regions)
	}
	r.regions[node] = region
}
