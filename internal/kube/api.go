package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// API reads and writes the API server directly. Each resource has its own
// REST client, and with it its own client-side rate limit (the rest.Config's
// QPS and Burst); all share one HTTP client. It is safe for concurrent use.
type API struct {
	clients map[schema.GroupKind]*resourceClient
}

var _ Client = (*API)(nil)

type resourceClient struct {
	resourceInfo
	rest *rest.RESTClient
}

// NewAPI returns a client of the API server rc names. Core objects travel
// as protobuf, keymount's as JSON (the API server serves custom resources
// in JSON only).
func NewAPI(rc *rest.Config) (*API, error) {
	if rc == nil {
		return nil, errors.New("no API server configuration")
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	a := &API{clients: map[schema.GroupKind]*resourceClient{}}
	for _, r := range resources {
		c, err := restClientFor(rc, hc, r.gvk.GroupVersion())
		if err != nil {
			return nil, err
		}
		a.clients[r.gvk.GroupKind()] = &resourceClient{resourceInfo: r, rest: c}
	}
	return a, nil
}

func restClientFor(rc *rest.Config, hc *http.Client, gv schema.GroupVersion) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(rc)
	cfg.GroupVersion = &gv
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	if gv.Group == "" {
		cfg.APIPath = "/api"
		cfg.ContentType = runtime.ContentTypeProtobuf
	} else {
		cfg.APIPath = "/apis"
		cfg.ContentType = runtime.ContentTypeJSON
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client of %s: %w", gv, err)
	}
	return c, nil
}

// client returns the REST client of obj's kind (an object or a list).
func (a *API) client(obj runtime.Object) (*resourceClient, error) {
	gk, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	c, ok := a.clients[gk]
	if !ok {
		return nil, fmt.Errorf("kube: no client for %s", gk)
	}
	return c, nil
}

// Get implements Reader.
func (a *API) Get(ctx context.Context, key types.NamespacedName, obj Object) error {
	c, err := a.client(obj)
	if err != nil {
		return err
	}
	return c.rest.Get().Namespace(key.Namespace).Resource(c.resource).Name(key.Name).
		VersionedParams(&metav1.GetOptions{}, parameterCodec).Do(ctx).Into(obj)
}

// List implements Reader.
func (a *API) List(ctx context.Context, list ObjectList, opts ListOptions) error {
	c, err := a.client(list)
	if err != nil {
		return err
	}
	return c.rest.Get().Namespace(opts.Namespace).Resource(c.resource).
		VersionedParams(opts.listOptions(), parameterCodec).Do(ctx).Into(list)
}

func (o ListOptions) listOptions() *metav1.ListOptions {
	lo := &metav1.ListOptions{Limit: o.Limit}
	if o.Labels != nil {
		lo.LabelSelector = o.Labels.String()
	}
	if o.Fields != nil {
		lo.FieldSelector = o.Fields.String()
	}
	return lo
}

// watch starts a watch of the objects opts selects, with options (the
// resource version, bookmarks) the informer chose.
func (a *API) watch(ctx context.Context, obj runtime.Object, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	c, err := a.client(obj)
	if err != nil {
		return nil, err
	}
	opts.Watch = true
	return c.rest.Get().Namespace(namespace).Resource(c.resource).
		VersionedParams(&opts, parameterCodec).Watch(ctx)
}

// list lists with options the informer chose.
func (a *API) list(ctx context.Context, list ObjectList, namespace string, opts metav1.ListOptions) error {
	c, err := a.client(list)
	if err != nil {
		return err
	}
	return c.rest.Get().Namespace(namespace).Resource(c.resource).
		VersionedParams(&opts, parameterCodec).Do(ctx).Into(list)
}

// Create implements Writer.
func (a *API) Create(ctx context.Context, obj Object, fieldManager string) error {
	c, err := a.client(obj)
	if err != nil {
		return err
	}
	return c.rest.Post().Namespace(obj.GetNamespace()).Resource(c.resource).
		VersionedParams(&metav1.CreateOptions{FieldManager: fieldManager}, parameterCodec).
		Body(obj).Do(ctx).Into(obj)
}

// Update implements Writer.
func (a *API) Update(ctx context.Context, obj Object) error {
	c, err := a.client(obj)
	if err != nil {
		return err
	}
	return c.rest.Put().Namespace(obj.GetNamespace()).Resource(c.resource).Name(obj.GetName()).
		VersionedParams(&metav1.UpdateOptions{}, parameterCodec).
		Body(obj).Do(ctx).Into(obj)
}

// Delete implements Writer.
func (a *API) Delete(ctx context.Context, obj Object, pre *metav1.Preconditions) error {
	c, err := a.client(obj)
	if err != nil {
		return err
	}
	return c.rest.Delete().Namespace(obj.GetNamespace()).Resource(c.resource).Name(obj.GetName()).
		Body(&metav1.DeleteOptions{Preconditions: pre}).Do(ctx).Error()
}

// Patch implements Writer.
func (a *API) Patch(ctx context.Context, obj Object, pt types.PatchType, data []byte, fieldManager string) error {
	return a.patch(ctx, obj, pt, data, &metav1.PatchOptions{FieldManager: fieldManager})
}

// Apply implements Writer.
func (a *API) Apply(ctx context.Context, obj Object, config []byte, fieldManager string) error {
	if fieldManager == "" {
		return errors.New("kube: an apply needs a field manager")
	}
	return a.patch(ctx, obj, types.ApplyPatchType, config, &metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)})
}

func (a *API) patch(ctx context.Context, obj Object, pt types.PatchType, data []byte, opts *metav1.PatchOptions) error {
	c, err := a.client(obj)
	if err != nil {
		return err
	}
	return c.rest.Patch(pt).Namespace(obj.GetNamespace()).Resource(c.resource).Name(obj.GetName()).
		VersionedParams(opts, parameterCodec).
		Body(data).Do(ctx).Into(obj)
}
