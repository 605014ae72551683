package kubeclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// Defaults of the provider's --qps and --burst.
const (
	// DefaultQPS is the sustained rate of API requests a second.
	DefaultQPS = 100
	// DefaultBurst is how many API requests may go at once above DefaultQPS.
	DefaultBurst = 200
)

// Config configures the client.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; "" means the in-cluster
	// configuration.
	Kubeconfig string
	// QPS and Burst are the client-side rate limits; both must be
	// positive.
	QPS   float64
	Burst int
	// UserAgent, when set, names the client to the API server.
	UserAgent string
}

// Validate reports a rate limit that is not positive.
func (c Config) Validate() error {
	if c.QPS <= 0 || c.Burst <= 0 {
		return fmt.Errorf("--qps %v and --burst %d must be positive", c.QPS, c.Burst)
	}
	return nil
}

// Client reads the few core/v1 objects the provider needs. It is safe for
// concurrent use.
type Client struct {
	rest *rest.RESTClient
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load API server config (set --kubeconfig outside a cluster): %w", err)
	}
	if cfg.UserAgent != "" {
		rc.UserAgent = cfg.UserAgent
	}
	return ForConfig(rc, cfg.QPS, cfg.Burst)
}

// ForConfig returns a client for rc with the rate limits qps and burst,
// which replace any rc has.
func ForConfig(rc *rest.Config, qps float64, burst int) (*Client, error) {
	if rc == nil {
		return nil, errors.New("no API server configuration")
	}
	if err := (Config{QPS: qps, Burst: burst}).Validate(); err != nil {
		return nil, err
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = float32(qps), burst
	rc.RateLimiter = nil // built from QPS and Burst
	rc.APIPath = "/api"
	rc.GroupVersion = &corev1.SchemeGroupVersion
	rc.NegotiatedSerializer = codecs.WithoutConversion()
	if rc.UserAgent == "" {
		rc.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Client{rest: c}, nil
}

// codecs decode core/v1 only: the provider links no other API group.
var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(fmt.Sprintf("register core/v1: %v", err)) // a programming error, caught by any test
	}
	return serializer.NewCodecFactory(scheme)
}()

// RateLimiter is the client's rate limiter, built from QPS and Burst.
func (c *Client) RateLimiter() flowcontrol.RateLimiter { return c.rest.GetRateLimiter() }

// GetServiceAccount reads the service account namespace/name.
func (c *Client) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sa := &corev1.ServiceAccount{}
	return sa, c.get(ctx, namespace, "serviceaccounts", name, sa)
}

// GetNode reads the node name.
func (c *Client) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	n := &corev1.Node{}
	return n, c.get(ctx, "", "nodes", name, n)
}

// GetPod reads the pod namespace/name.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, c.get(ctx, namespace, "pods", name, p)
}

// get reads one object; its errors are client-go's (apierrors).
func (c *Client) get(ctx context.Context, namespace, resource, name string, into runtime.Object) error {
	req := c.rest.Get()
	if namespace != "" { // "" is a cluster-scoped object (a node)
		req = req.Namespace(namespace)
	}
	return req.Resource(resource).Name(name).
		VersionedParams(&metav1.GetOptions{}, metav1.ParameterCodec).Do(ctx).Into(into)
}

// tokenReviewsPath is where TokenReviews are created.
const tokenReviewsPath = "/apis/authentication.k8s.io/v1/tokenreviews"

// GetRaw GETs path (the service account issuer's discovery document and
// keys) and returns the body; its errors are client-go's (apierrors).
func (c *Client) GetRaw(ctx context.Context, path string) ([]byte, error) {
	return c.rest.Get().AbsPath(path).DoRaw(ctx)
}

// ReviewToken creates a TokenReview of token for audiences and returns
// its status. The token is sent in the request body only: errors never
// carry it.
func (c *Client) ReviewToken(ctx context.Context, token string, audiences []string) (*authenticationv1.TokenReviewStatus, error) {
	body, err := json.Marshal(&authenticationv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "TokenReview"},
		Spec:     authenticationv1.TokenReviewSpec{Token: token, Audiences: audiences},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding a TokenReview: %w", err)
	}
	raw, err := c.rest.Post().AbsPath(tokenReviewsPath).SetHeader("Content-Type", "application/json").Body(body).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating a TokenReview: %w", err)
	}
	var review authenticationv1.TokenReview
	if err := json.Unmarshal(raw, &review); err != nil {
		return nil, fmt.Errorf("decoding the TokenReview answer: %w", err)
	}
	return &review.Status, nil
}
