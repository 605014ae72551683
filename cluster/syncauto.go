package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/kube"
)

// syncVerbs are what secretObjects sync needs on Secrets: the watch of
// managed Secrets (list, watch), the first write (create) and the later
// applies (patch).
var syncVerbs = []string{"list", "watch", "create", "patch"}

// mayWriteSecrets asks the API server (SelfSubjectAccessReview, which
// every authenticated user may create) whether the driver's identity has
// every verb of syncVerbs on Secrets in all namespaces: what upstream's
// chart grants with syncSecret.enabled, and keymount's secret-sync
// component grants. It returns the first verb refused, "" when none is.
func mayWriteSecrets(ctx context.Context, rc *rest.Config) (string, error) {
	c, err := kube.NewRESTClient(rc, schema.GroupVersion{Group: "authorization.k8s.io", Version: "v1"})
	if err != nil {
		return "", err
	}
	for _, verb := range syncVerbs {
		body, err := json.Marshal(map[string]any{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
			"spec": map[string]any{"resourceAttributes": map[string]string{"verb": verb, "resource": "secrets", "version": "v1"}},
		})
		if err != nil {
			return "", err
		}
		raw, err := c.Post().Resource("selfsubjectaccessreviews").Body(body).DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("ask whether the driver may %s Secrets: %w", verb, err)
		}
		var review struct {
			Status struct {
				Allowed bool `json:"allowed"`
			} `json:"status"`
		}
		if err := json.Unmarshal(raw, &review); err != nil {
			return "", fmt.Errorf("ask whether the driver may %s Secrets: %w", verb, err)
		}
		if !review.Status.Allowed {
			return verb, nil
		}
	}
	return "", nil
}

// decideSync settles cfg.SyncSecrets when cfg.SyncSecretsAuto asks for it:
// on when the RBAC allows it, as upstream syncs whenever its chart granted
// the Secret rules.
func decideSync(ctx context.Context, cfg *Config) error {
	if !cfg.SyncSecretsAuto {
		return nil
	}
	refused, err := mayWriteSecrets(ctx, cfg.Rest)
	if err != nil {
		return err
	}
	cfg.SyncSecrets = refused == ""
	if cfg.SyncSecrets {
		klog.InfoS("secretObjects sync on: the driver may list, watch, create and patch Secrets (--sync-secrets=auto)")
	} else {
		klog.InfoS("secretObjects sync off: the driver may not "+refused+" Secrets (--sync-secrets=auto); "+
			"grant the secret-sync RBAC or set --sync-secrets to turn it on", "refused", refused)
	}
	return nil
}
