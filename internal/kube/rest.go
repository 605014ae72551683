package kube

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// NewRESTClient returns a REST client of an API group whose types the
// package's scheme does not hold (apps/v1, for one), for raw requests:
// bodies and answers are JSON, which the caller decodes into small types of
// its own, so the group's Go types are never linked. Failed requests return
// apimachinery's errors (apierrors), as API's do. It has its own
// client-side rate limit, rc's QPS and Burst.
func NewRESTClient(rc *rest.Config, gv schema.GroupVersion) (rest.Interface, error) {
	if rc == nil {
		return nil, errors.New("no API server configuration")
	}
	if gv.Group == "" {
		return nil, fmt.Errorf("kube: %s is the core group, which API serves", gv)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return restClientFor(rc, hc, gv)
}
