package secretobjects

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// secretApply is a server-side apply configuration of a Secret: only the
// fields it sets are in its JSON, and the fields a manager applied and no
// longer sets are removed. (client-go's applyconfigurations package would
// do the same and link every API group of Kubernetes into the driver.)
type secretApply struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   secretApplyMeta    `json:"metadata"`
	Type       *corev1.SecretType `json:"type,omitempty"`
	Data       map[string][]byte  `json:"data,omitempty"`
}

type secretApplyMeta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace"`
	UID             types.UID         `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	OwnerReferences []ownerApply      `json:"ownerReferences,omitempty"`
}

// ownerApply is an owner reference in an apply configuration: without the
// controller and blockOwnerDeletion flags.
type ownerApply struct {
	APIVersion string    `json:"apiVersion,omitempty"`
	Kind       string    `json:"kind,omitempty"`
	Name       string    `json:"name,omitempty"`
	UID        types.UID `json:"uid,omitempty"`
}

// newSecretApply is the configuration of the Secret d names, applied on
// the Secret of uid only: an apply never creates a Secret.
func newSecretApply(d *desired, uid types.UID) *secretApply {
	return &secretApply{
		APIVersion: "v1", Kind: "Secret",
		Metadata: secretApplyMeta{Name: d.name, Namespace: d.namespace, UID: uid},
	}
}

// apply applies cfg as manager, taking over fields other managers own, and
// returns the Secret as applied.
func (s *Syncer) apply(ctx context.Context, cfg *secretApply, manager string) (*corev1.Secret, error) {
	body, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	out := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Metadata.Namespace, Name: cfg.Metadata.Name}}
	if err := s.c.Apply(ctx, out, body, manager); err != nil {
		return nil, err
	}
	return out, nil
}
