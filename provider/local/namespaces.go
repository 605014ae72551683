package local

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/keymount/keymount/provider/server"
)

// attrPodNamespace is the volume-context key kubelet sets to the pod's
// namespace (the CSIDriver's podInfoOnMount), which the driver passes on.
const attrPodNamespace = "csi.storage.k8s.io/pod.namespace"

// Option configures a Provider.
type Option func(*Provider) error

// WithAllowedNamespaces confines the provider to mounts for pods of the
// given namespaces: a request naming any other namespace, or none, is
// refused with PermissionDenied before any file is read. No namespaces
// (the default) serves every namespace.
//
// The namespace is the one the request names: the provider has no API
// access to prove it, so the confinement holds against pod authors (the
// driver passes kubelet's pod namespace, whatever the pod's volume says),
// not against a process that reaches the provider's socket itself.
func WithAllowedNamespaces(namespaces ...string) Option {
	return func(p *Provider) error {
		if len(namespaces) == 0 {
			return nil
		}
		allowed := make(map[string]struct{}, len(namespaces))
		for _, ns := range namespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("allowed namespace %q is not a namespace name (%s): list namespace names, comma-separated, in --allowed-namespaces",
					ns, strings.Join(errs, "; "))
			}
			allowed[ns] = struct{}{}
		}
		p.namespaces = allowed
		return nil
	}
}

// AllowedNamespaces are the namespaces the provider serves, sorted; nil
// for all.
func (p *Provider) AllowedNamespaces() []string {
	if p.namespaces == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(p.namespaces))
}

// checkNamespace refuses a request for a pod outside the allowed
// namespaces.
func (p *Provider) checkNamespace(req *server.MountRequest) error {
	if p.namespaces == nil {
		return nil
	}
	ns, ok := req.Attributes[attrPodNamespace]
	if !ok || ns == "" {
		return &kindError{server.ErrPermissionDenied, fmt.Sprintf("the request names no pod namespace (%s) and this provider "+
			"serves only namespaces %s: set podInfoOnMount: true in the CSIDriver object", attrPodNamespace, p.allowedList())}
	}
	if _, ok := p.namespaces[ns]; !ok {
		return &kindError{server.ErrPermissionDenied, fmt.Sprintf("namespace %q may not mount files of this provider: "+
			"it serves only namespaces %s (--allowed-namespaces)", truncate(ns), p.allowedList())}
	}
	return nil
}

// allowedList names the allowed namespaces for a message, bounded.
func (p *Provider) allowedList() string {
	const maxListed = 10
	ns := p.AllowedNamespaces()
	if len(ns) > maxListed {
		return fmt.Sprintf("%s and %d more", strings.Join(ns[:maxListed], ", "), len(ns)-maxListed)
	}
	return strings.Join(ns, ", ")
}

// truncate bounds a caller's string in a message.
func truncate(s string) string {
	const maxLen = 253
	if len(s) > maxLen {
		return s[:maxLen] + "..."
	}
	return s
}
