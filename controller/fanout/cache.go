package fanout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// NamespaceMeta is the object to Get, List or watch namespaces with from
// the cache NewCache builds: metadata only (name and labels are all
// matching needs).
func NamespaceMeta() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
}

// NamespaceMetaList lists namespaces' metadata from that cache.
func NamespaceMetaList() *metav1.PartialObjectMetadataList {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}}
}

// NewCache returns the fan-out controllers' own cache, added to mgr (it
// runs on the leader): namespaces' metadata (a metadata-only watch, so a
// new or relabelled namespace is seen at once), and the Secrets and
// ConfigMaps carrying LabelCopy — the copies, of every writer, and
// nothing else — indexed by IndexOwner. A copy in the cache holds its
// metadata and its data's keys with nil values, the digest of the data
// in AnnotationCachedDigest (Writer compares by it): 1,000 copies of a
// TLS Secret take about a megabyte instead of six. Readers must not
// change what the cache returns. Build one per manager and share
// it between the reflector and mirror reconcilers.
func NewCache(mgr ctrl.Manager) (cache.Cache, error) {
	copies, err := labels.NewRequirement(LabelCopy, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// The copies are held as metadata, their data's keys and a digest of
	// it (trimCopy), and never changed by their readers: the cache hands
	// out its own objects, not deep copies of each.
	byLabel := cache.ByObject{Label: labels.NewSelector().Add(*copies), Transform: trimCopy, UnsafeDisableDeepCopy: new(true)}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: scheme, Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:    byLabel,
			&corev1.ConfigMap{}: byLabel,
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("fanout: cache: %w", err)
	}
	for _, o := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		if err := c.IndexField(context.Background(), o, IndexOwner, ownerIndex); err != nil {
			return nil, fmt.Errorf("fanout: index %T: %w", o, err)
		}
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, nil
}

// CopiesOf lists from c the copies of kind list (a *corev1.SecretList or
// *corev1.ConfigMapList) that writer wrote for the owner namespace/name.
func CopiesOf(ctx context.Context, c client.Reader, list client.ObjectList, writer, namespace, name string) error {
	return c.List(ctx, list, client.MatchingFields{IndexOwner: OwnerKey(writer, namespace, name)})
}

// RunInformer adds inf to mgr as a runnable (on the leader, stopped with
// the manager).
func RunInformer(mgr ctrl.Manager, inf toolscache.SharedIndexInformer) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		inf.RunWithContext(ctx)
		return nil
	}))
}

// InformerSource feeds a controller from inf (a NewSourceInformer): once
// inf has synced, each added, changed or deleted object is mapped by fn
// to the requests to queue.
func InformerSource(inf toolscache.SharedIndexInformer, fn func(*metav1.PartialObjectMetadata) []reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("fanout: source informer did not sync: %w", ctx.Err())
		}
		add := func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				for _, r := range fn(m) {
					q.Add(r)
				}
			}
		}
		_, err := inf.AddEventHandlerWithOptions(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    add,
			UpdateFunc: func(_, n any) { add(n) },
			DeleteFunc: add,
		}, toolscache.HandlerOptions{})
		return err
	})
}
