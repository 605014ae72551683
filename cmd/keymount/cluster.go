package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/internal/kube"
)

// clusterClass reads the class --class names from the API server of
// --kubeconfig, in the pod's namespace, with a live GET; the in-process
// driver reads it again the same way when it mounts. Nothing here can write
// to the cluster: the client is the driver's own (internal/kube), handed on
// only as a kube.Reader. (It links no controller-runtime and no typed
// clientset, which keeps `make demo`'s cold build short.)
func clusterClass(ctx context.Context, cfg *mountConfig, warnings io.Writer) (*classSource, error) {
	rc, namespace, err := loadKubeconfig(cfg.kubeconfig, cfg.kubeContext)
	if err != nil {
		return nil, err
	}
	if !cfg.namespaceSet {
		cfg.pod.Namespace = namespace
	}
	rc.UserAgent = "keymount-cli/" + version
	// Each request, discovery included, gives up with the command.
	rc.Timeout = cfg.timeout
	rc.WarningHandler = rest.NewWarningWriter(warnings, rest.WarningWriterOptions{Deduplicate: true})
	api, err := kube.NewAPI(rc)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", rc.Host, err)
	}
	var live kube.Reader = api
	classes := class.NewKubeResolver(live, live)
	spc, err := classes.Resolve(ctx, cfg.pod.Namespace, cfg.className)
	if errors.Is(err, class.ErrNotFound) && !servesClasses(ctx, rc) {
		err = errNoClassAPI
	}
	if err != nil {
		return nil, classReadError(ctx, rc.Host, cfg.timeout, err)
	}
	return &classSource{
		spc:      spc,
		resolver: classes,
		origin:   fmt.Sprintf("namespace %q of the API server %s", cfg.pod.Namespace, rc.Host),
	}, nil
}

// loadKubeconfig returns the client configuration of a kubeconfig file's
// context, its current one unless contextName is set, and that context's
// namespace ("default" when it names none). Only the file is read: neither
// $KUBECONFIG nor an in-cluster configuration stands in for it.
func loadKubeconfig(path, contextName string) (*rest.Config, string, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	raw, err := rules.Load()
	if err != nil {
		return nil, "", fmt.Errorf("--kubeconfig: %w", err)
	}
	cc := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, &clientcmd.ConfigOverrides{}, rules)
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	namespace, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	return rc, namespace, nil
}

// errNoClassAPI: the API server does not serve SecretProviderClasses.
var errNoClassAPI = errors.New("no such API")

// servesClasses tells a missing class from a missing CRD: it asks the API
// server's discovery document of secrets-store.csi.x-k8s.io/v1 whether it
// lists secretproviderclasses. When it cannot tell (any other error), it
// says yes, and the not-found stands.
func servesClasses(ctx context.Context, rc *rest.Config) bool {
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return true
	}
	base, _, err := rest.DefaultServerUrlFor(rc)
	if err != nil {
		return true
	}
	gv := secretsstorev1.SchemeGroupVersion
	u := base.JoinPath("apis", gv.Group, gv.Version)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return true
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return true
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusNotFound {
		return false
	}
	var list metav1.APIResourceList
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list) != nil {
		return true
	}
	for _, r := range list.APIResources {
		if r.Name == "secretproviderclasses" {
			return true
		}
	}
	return false
}

// classReadError explains a failed read of the class. A missing or unusable
// class fails as the driver fails it, with FailedPrecondition; every other
// error names the API server.
func classReadError(ctx context.Context, host string, timeout time.Duration, err error) error {
	var netErr net.Error
	switch {
	case errors.Is(err, class.ErrNotFound), errors.Is(err, class.ErrInvalid):
		return &callError{
			op:   "mount",
			st:   status.New(codes.FailedPrecondition, err.Error()),
			hint: fmt.Sprintf(" (read from the API server %s: check --class and --pod-namespace)", host),
		}
	case errors.Is(err, errNoClassAPI):
		return fmt.Errorf("the API server %s serves no SecretProviderClass %s: install keymount's CRDs (deploy/crds)",
			host, secretsstorev1.SchemeGroupVersion)
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no answer from the API server %s within %s (raise --timeout to wait longer): %w", host, timeout, err)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the API server %s: %w", host, err)
	default:
		return fmt.Errorf("read the class from the API server %s: %w", host, err)
	}
}
