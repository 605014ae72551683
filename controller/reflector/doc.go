// Package reflector serves emberstack's kubernetes-reflector annotations
// unchanged in keymount-controller, on the fan-out core (controller/fanout).
//
// A Secret or ConfigMap annotated reflection-allowed and
// reflection-auto-enabled is copied into every namespace that both
// reflection-allowed-namespaces (and its selector) and
// reflection-auto-namespaces (and its selector) hold — names or regular
// expressions matching the whole name, or label selectors; an empty pair
// holds every namespace — but its own. A namespace created or relabelled
// is served at once (the namespace metadata watch), and a copy leaves a
// namespace that no longer matches. A source change reaches every copy; a
// source deleted (or no longer annotated) takes keymount's copies with it.
// A copy edited or deleted by hand is put back.
//
// A manual mirror (an object annotated reflects: "<namespace>/<name>") is
// kept in step when the source allows the mirror's namespace; it is never
// deleted (reflector's behaviour).
//
// Copies carry reflector's bookkeeping as reflector writes it — reflects,
// auto-reflects ("True"/"False"), reflected-version (the source's resource
// version), reflected-at — plus keymount's mark (fanout.LabelCopy
// "reflector", fanout.AnnotationOwner). So a cluster can switch both ways:
// keymount adopts a copy reflector wrote (one whose reflects names the
// source) and reflector recognises keymount's. Unlike reflector, keymount
// never writes over a same-named object that is not such a copy: it
// records fanout.ReasonCopyConflict on the source and retries after
// ConflictRetry.
//
// Sources are found without watching every Secret: the metadata of
// Secrets and ConfigMaps is listed and watched, and only objects carrying
// reflector's annotations are kept (fanout.NewSourceInformer); a source's
// data is read with one GET when its copies are written.
package reflector
