package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/driver/class"
	"github.com/keymount/keymount/internal/kube/crreader"
)

// clusterClass reads the class --class names from the API server of
// --kubeconfig, in the pod's namespace, with a live GET; the in-process
// driver reads it again the same way when it mounts. Nothing here can write
// to the cluster: the client is only a client.Reader, and it would send any
// write as a server-side dry run.
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
	live, err := newClassReader(rc)
	if err != nil {
		return nil, fmt.Errorf("connect to the API server %s: %w", rc.Host, err)
	}
	classes := class.NewKubeResolver(crreader.New(live), crreader.New(live))
	spc, err := classes.Resolve(ctx, cfg.pod.Namespace, cfg.className)
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

// newClassReader returns a client that reads SecretProviderClasses and
// nothing else from the API server.
func newClassReader(rc *rest.Config) (client.Reader, error) {
	scheme := runtime.NewScheme()
	if err := secretsstorev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(rc, client.Options{Scheme: scheme, DryRun: ptr.To(true), Log: klog.Background()})
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
	case meta.IsNoMatchError(err):
		return fmt.Errorf("the API server %s serves no SecretProviderClass %s: install keymount's CRDs (deploy/crds): %w",
			host, secretsstorev1.SchemeGroupVersion, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no answer from the API server %s within %s (raise --timeout to wait longer): %w", host, timeout, err)
	case errors.As(err, &netErr):
		return fmt.Errorf("cannot reach the API server %s: %w", host, err)
	default:
		return fmt.Errorf("read the class from the API server %s: %w", host, err)
	}
}
