package reflector

import (
	"context"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/keymount/keymount/controller/fanout"
)

// EventSource is the component name of the reconcilers' events.
const EventSource = "keymount-controller"

// ConflictRetry is how often a copy blocked by an object keymount did not
// write is tried again (that object is not watched).
const ConflictRetry = time.Minute

// indexReflects indexes the source informer's mirrors by the source they
// reflect ("<namespace>/<name>").
const indexReflects = "reflects"

// Options configure SetupWithManager.
type Options struct {
	// Cache is fanout.NewCache's cache (shared with the mirror
	// reconciler).
	Cache cache.Cache
	// Workers reconcile sources at once per kind; 1 when 0.
	Workers int
	// Events records on sources and mirrors; the manager's when nil.
	Events events.EventRecorder
	// Writes, when set, writes the copies and reads, uncached, a
	// same-named object in their way: a client with a rate limit of its
	// own (keymount-controller's --fanout-kube-api-qps), so that a source
	// copied into 1,000 namespaces is not held to the controller's. The
	// manager's client and API reader when nil.
	Writes client.Client
	// Metrics, when set, count the copies (writer="reflector") and time
	// a source change to its last copy.
	Metrics *fanout.Metrics
}

// Reconciler reflects the sources and manual mirrors of one Kind.
type Reconciler struct {
	kind    Kind
	cache   cache.Cache
	sources toolscache.SharedIndexInformer
	live    client.Reader
	writer  *fanout.Writer
	events  events.EventRecorder
	clock   clock.PassiveClock
}

// SetupWithManager adds to mgr one reconciler per kind (Secrets and
// ConfigMaps), each with its source informer (fanout.NewSourceInformer
// keeping IsReflectorObject).
func SetupWithManager(_ context.Context, mgr ctrl.Manager, opts Options) error {
	md, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("reflector: metadata client: %w", err)
	}
	if opts.Events == nil {
		opts.Events = mgr.GetEventRecorder(EventSource)
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	opts.Metrics.Init(WriterName)
	var (
		writes     = mgr.GetClient()
		writesLive = mgr.GetAPIReader()
	)
	if opts.Writes != nil {
		writes, writesLive = opts.Writes, opts.Writes
	}
	for _, k := range []Kind{Secrets, ConfigMaps} {
		inf := fanout.NewSourceInformer(md, k.resource, func(m *metav1.PartialObjectMetadata) bool { return IsReflectorObject(m.Annotations) })
		if err := inf.AddIndexers(toolscache.Indexers{indexReflects: reflectsIndex}); err != nil {
			return err
		}
		if err := fanout.RunInformer(mgr, inf); err != nil {
			return err
		}
		r := &Reconciler{
			kind: k, cache: opts.Cache, sources: inf, live: mgr.GetAPIReader(), events: opts.Events, clock: clock.RealClock{},
			writer: &fanout.Writer{Name: WriterName, Client: writes, Live: writesLive, Events: opts.Events,
				Volatile: []string{AnnotationReflectedAt}, Recent: fanout.NewRecent(), Metrics: opts.Metrics},
		}
		if err := r.setup(mgr, opts.Workers); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) setup(mgr ctrl.Manager, workers int) error {
	// Names are checked for uniqueness per process; a test runs several
	// managers in one.
	copts := crcontroller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: new(true)}
	return ctrl.NewControllerManagedBy(mgr).Named("reflector-" + r.kind.resource.Resource).WithOptions(copts).
		WatchesRawSource(fanout.InformerSource(r.sources, r.sourceRequests)).
		WatchesRawSource(source.Kind[client.Object](r.cache, fanout.NamespaceMeta(),
			handler.EnqueueRequestsFromMapFunc(r.namespaceRequests), namespaceChanges())).
		WatchesRawSource(source.Kind(r.cache, r.kind.newObj(), fanout.CopyHandler(r.writer.Recent, r.copyRequests))).
		Complete(r)
}

// reflectsIndex indexes a mirror by the source it names.
func reflectsIndex(obj any) ([]string, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, nil
	}
	if ref := parseRef(m.Annotations[AnnotationReflects]); ref != nil {
		return []string{ref.String()}, nil
	}
	return nil, nil
}

// sourceRequests: an object of the source informer (a source or a manual
// mirror) is reconciled, and so are the manual mirrors of a source.
func (r *Reconciler) sourceRequests(m *metav1.PartialObjectMetadata) []reconcile.Request {
	out := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}}}
	mirrors, _ := r.sources.GetIndexer().ByIndex(indexReflects, m.Namespace+"/"+m.Name)
	for _, o := range mirrors {
		if mm, ok := o.(*metav1.PartialObjectMetadata); ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mm.Namespace, Name: mm.Name}})
		}
	}
	return out
}

// namespaceRequests: a namespace created, relabelled or deleted
// reconciles every automatic source, and the manual mirrors in it.
func (r *Reconciler) namespaceRequests(_ context.Context, ns client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, o := range r.sources.GetStore().List() {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		p := PropertiesOf(m.Annotations)
		if p.IsAutoSource() || (p.Reflects != nil && m.Namespace == ns.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}})
		}
	}
	return out
}

// copyRequests: a change of a copy this package wrote (an edit by hand,
// a delete) reconciles its source; of a manual mirror, the mirror. The
// echoes of the reconciler's own writes do not (fanout.CopyHandler).
func (r *Reconciler) copyRequests(c client.Object) []reconcile.Request {
	if !fanout.IsCopy(c, WriterName) {
		return nil
	}
	a := c.GetAnnotations()
	if !parseBool(a[AnnotationAutoReflects]) {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(c)}}
	}
	if ref := parseRef(a[AnnotationReflects]); ref != nil {
		return []reconcile.Request{{NamespacedName: *ref}}
	}
	return nil
}

// namespaceChanges lets through namespaces created, deleted, relabelled
// or starting to terminate.
func namespaceChanges() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld, e.ObjectNew
			return !maps.Equal(o.GetLabels(), n.GetLabels()) || (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
		},
	}
}
