package synchash

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
)

// The Secret holding the key, in the controller's namespace.
const (
	// KeySecretName names it.
	KeySecretName = "keymount-controller-hash-key"
	// KeySecretDataKey is its data key holding the KeySize bytes.
	KeySecretDataKey = "key"
	// FieldManager writes it.
	FieldManager = "keymount-controller"
)

// KeySource loads the controller's hash key, creating it on first use, and
// caches the Hasher. It is safe for concurrent use.
type KeySource struct {
	client    corev1client.CoreV1Interface
	namespace string
	random    io.Reader

	mu     sync.Mutex
	hasher *Hasher
}

// NewKeySource returns a KeySource for the key Secret in namespace (the
// controller's own).
func NewKeySource(client corev1client.CoreV1Interface, namespace string) (*KeySource, error) {
	if client == nil || namespace == "" {
		return nil, errors.New("synchash: a Kubernetes client and the controller's namespace are needed for the hash key")
	}
	return &KeySource{client: client, namespace: namespace, random: rand.Reader}, nil
}

// Hasher returns the Hasher keyed with the Secret's key: read it, or create
// it with KeySize random bytes when absent; if another replica created it
// first, read theirs. The first success is cached for good; a failure is
// retried on the next call.
func (s *KeySource) Hasher(ctx context.Context) (*Hasher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hasher != nil {
		return s.hasher, nil
	}
	key, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	h, err := New(key)
	if err != nil {
		return nil, s.badSecret()
	}
	s.hasher = h
	return h, nil
}

func (s *KeySource) load(ctx context.Context) ([]byte, error) {
	secrets := s.client.Secrets(s.namespace)
	got, err := secrets.Get(ctx, KeySecretName, metav1.GetOptions{})
	if err == nil {
		return s.keyOf(got)
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("synchash: read the hash key Secret %s/%s: %w", s.namespace, KeySecretName, err)
	}
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(s.random, key); err != nil {
		return nil, fmt.Errorf("synchash: generate the hash key: %w", err)
	}
	immutable := true
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.namespace,
			Name:      KeySecretName,
			Labels: map[string]string{
				"app.kubernetes.io/name":      "keymount-controller",
				"app.kubernetes.io/component": "hash-key",
			},
		},
		Type:      corev1.SecretTypeOpaque,
		Immutable: &immutable,
		Data:      map[string][]byte{KeySecretDataKey: key},
	}
	_, err = secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		klog.InfoS("created the syncHash key", "secret", klog.KRef(s.namespace, KeySecretName))
		return key, nil
	case apierrors.IsAlreadyExists(err): // another replica won the race: use its key
		got, err = secrets.Get(ctx, KeySecretName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("synchash: read the hash key Secret %s/%s another replica created: %w", s.namespace, KeySecretName, err)
		}
		return s.keyOf(got)
	default:
		return nil, fmt.Errorf("synchash: create the hash key Secret %s/%s: %w", s.namespace, KeySecretName, err)
	}
}

func (s *KeySource) keyOf(secret *corev1.Secret) ([]byte, error) {
	key := secret.Data[KeySecretDataKey]
	if len(key) < KeySize {
		return nil, s.badSecret()
	}
	return key, nil
}

// badSecret never quotes the Secret's contents.
func (s *KeySource) badSecret() error {
	return fmt.Errorf("synchash: the hash key Secret %s/%s has no data.%s of at least %d bytes: delete it and restart the controller, "+
		"which creates a new key (every syncHash changes once)", s.namespace, KeySecretName, KeySecretDataKey, KeySize)
}
