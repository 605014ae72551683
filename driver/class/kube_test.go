package class

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/internal/kube/kubetest"
)

func spcObject(ns, name, provider string) *secretsstorev1.SecretProviderClass {
	return &secretsstorev1.SecretProviderClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       secretsstorev1.SecretProviderClassSpec{Provider: secretsstorev1.Provider(provider)},
	}
}

func fakeReader(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := secretsstorev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestKubeResolver(t *testing.T) {
	inCache := spcObject("shop", "cached", "aws")
	onlyLive := spcObject("shop", "fresh", "local")
	noProvider := spcObject("shop", "empty", "")
	cache := fakeReader(t, inCache)
	live := fakeReader(t, inCache, onlyLive, noProvider)
	r := NewKubeResolver(kubetest.Reader(cache), kubetest.Reader(live))

	if c, err := r.Resolve(t.Context(), "shop", "cached"); err != nil || c.Spec.Provider != "aws" {
		t.Fatalf("cached class: %v, %v", c, err)
	}
	// Created together with the pod: not in the cache yet, found live.
	if c, err := r.Resolve(t.Context(), "shop", "fresh"); err != nil || c.Spec.Provider != "local" {
		t.Fatalf("class missing from the cache: %v, %v", c, err)
	}
	_, err := r.Resolve(t.Context(), "other", "cached")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"cached" in namespace "other"`) {
		t.Fatalf("missing class: err = %v", err)
	}
	if _, err := r.Resolve(t.Context(), "shop", "empty"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("class without provider: err = %v, want ErrInvalid", err)
	}
}

func TestKubeResolverKeepsAPIErrors(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: secretsstorev1.GroupName, Resource: "secretproviderclasses"}, "x", errors.New("rbac"))
	live := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return forbidden
		},
	}).Build()
	_, err := NewKubeResolver(kubetest.Reader(fakeReader(t)), kubetest.Reader(live)).Resolve(t.Context(), "shop", "x")
	if !apierrors.IsForbidden(err) || errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want the Forbidden error kept", err)
	}
}
