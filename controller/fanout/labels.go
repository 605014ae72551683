package fanout

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the server-side apply field manager of every copy, the
// controller's as the SecretSync reconciler's.
const FieldManager = "keymount-controller"

// LabelCopy marks a Secret or ConfigMap as a copy keymount wrote; its value
// names the writer (Writer.Name: "reflector", "mirror"). The copies cache
// selects by it, the admission policies allow the controller to write,
// update and delete only objects that carry it.
const LabelCopy = "fanout.keymount.io/copy"

// AnnotationOwner names, on a copy, the object that asked for it:
// "<namespace>/<name>" of the reflector source Secret or ConfigMap, or of
// the SecretMirror. A copy event requeues that owner (OwnerKey).
const AnnotationOwner = "fanout.keymount.io/owner"

// IndexOwner indexes the copies cache by "<writer>/<namespace>/<name>" of
// their owner (OwnerKey), so a reconciler lists the copies of one owner.
const IndexOwner = "fanout.keymount.io/owner"

// OwnerKey is the IndexOwner value of the copies that writer wrote for
// the owner namespace/name.
func OwnerKey(writer, namespace, name string) string {
	return writer + "/" + namespace + "/" + name
}

// ownerIndex is the IndexOwner function: a copy's OwnerKey, none for an
// object without the label or the annotation.
func ownerIndex(o client.Object) []string {
	w := o.GetLabels()[LabelCopy]
	owner := o.GetAnnotations()[AnnotationOwner]
	if w == "" || !strings.Contains(owner, "/") {
		return nil
	}
	return []string{w + "/" + owner}
}

// IsCopy reports whether o is a copy the writer named w wrote.
func IsCopy(o client.Object, w string) bool {
	return o != nil && o.GetLabels()[LabelCopy] == w
}
