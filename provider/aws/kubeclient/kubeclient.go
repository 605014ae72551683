package kubeclient

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
}

// Validate reports a rate limit that is not positive.
func (c Config) Validate() error {
	if c.QPS <= 0 || c.Burst <= 0 {
		return fmt.Errorf("--qps %v and --burst %d must be positive", c.QPS, c.Burst)
	}
	return nil
}

// New returns a clientset for cfg.
func New(cfg Config) (*kubernetes.Clientset, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load API server config (set --kubeconfig outside a cluster): %w", err)
	}
	return ForConfig(rc, cfg.QPS, cfg.Burst)
}

// ForConfig returns a clientset for rc with the rate limits qps and burst,
// which replace any rc has.
func ForConfig(rc *rest.Config, qps float64, burst int) (*kubernetes.Clientset, error) {
	if rc == nil {
		return nil, errors.New("no API server configuration")
	}
	if err := (Config{QPS: qps, Burst: burst}).Validate(); err != nil {
		return nil, err
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = float32(qps), burst
	rc.RateLimiter = nil // built from QPS and Burst
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}
