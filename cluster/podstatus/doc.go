// Package podstatus writes the SecretProviderClassPodStatus of each mounted
// volume: upstream's object (name <pod>-<namespace>-<class>, the node label,
// an owner reference to the pod, podName, secretProviderClassName, mounted,
// targetPath, objects) plus keymount's conditions (Mounted, Current,
// SecretsSynced), lastRefreshTime and observedGeneration.
//
// # No API write when nothing changed
//
// Kubelet republishes every mounted volume about once a minute. Writer
// computes the object it wants from what its reader returns (the driver's
// node-scoped cache) and writes only when the two differ. Conditions follow
// k8s.io/apimachinery/pkg/api/meta.SetStatusCondition: a condition keeps its
// lastTransitionTime while its status stays the same, so an unchanged
// condition is never a change. Times are truncated to whole seconds, as the
// API server stores them, before they are compared.
//
// # lastRefreshTime moves with a change
//
// lastRefreshTime is when the provider last answered successfully, and that
// moves forward on every refresh, including refreshes that found nothing new.
// Writing it every time would cost one API write per refresh per volume even
// when the files did not change, which is exactly what keymount promises not
// to do. So lastRefreshTime is written together with any other change (new
// objects or versions, a condition that flips, a handled trigger), and by
// default never on its own: with nothing changing, 200 volumes refreshed
// every 2 minutes cost no API write in an hour. Writer.RefreshTimeGranularity
// set to a duration d >= 0 also writes it alone once the new value is more
// than d newer than the stored one. Readers that need the time of each
// refresh use the driver's metrics and log; a failed refresh is never
// hidden, since it flips the Current condition, which is written at once.
//
// # Concurrency
//
// Writes use optimistic concurrency: an Update carries the resourceVersion
// it was computed from, and on a conflict (or an AlreadyExists on create,
// when the cache had not seen the object yet) the object is read again from
// the live client, not the cache, and the change is recomputed. The pod
// status CRD has no status subresource, as upstream's, so a plain Update
// writes the status.
//
// Errors mention names, versions and the provider's error text, never
// secret values: the driver's errors carry none.
package podstatus
