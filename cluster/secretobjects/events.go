package secretobjects

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/keymount/keymount/driver"
)

// maxWarned bounds the problems remembered; past it the memory starts over,
// which at worst repeats a warning.
const maxWarned = 1024

// problemKey names a Secret as one class syncs it.
type problemKey struct {
	namespace, secret, class string
}

// warnings remembers the lasting problems already announced, so a problem a
// sync meets again and again is one Warning event, not one per refresh.
type warnings struct {
	mu   sync.Mutex
	seen map[problemKey]string // the message announced
}

// first records a problem and reports whether it is new.
func (w *warnings) first(k problemKey, message string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[k] == message {
		return false
	}
	if w.seen == nil || len(w.seen) >= maxWarned {
		w.seen = map[problemKey]string{}
	}
	w.seen[k] = message
	return true
}

// resolved forgets a problem: a new one is announced again.
func (w *warnings) resolved(k problemKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.seen, k)
}

// podReference is the pod of an outcome, as events name it.
func podReference(o *driver.Outcome) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: "v1", Kind: "Pod",
		Namespace: o.PodNamespace, Name: o.PodName, UID: types.UID(o.PodUID),
	}
}

// announce emits the event of one result on the outcome's pod: a Warning for
// a failure (a lasting one once until it is resolved, an API failure every
// time), a Normal event when a Secret's data changed. A created Secret gets
// none: the pod status's SecretsSynced condition says it, and a first
// publish costs no API write beyond the Secret and the status.
// Messages name Secrets, classes and keys only.
func (s *Syncer) announce(o *driver.Outcome, r result) {
	k := problemKey{namespace: o.PodNamespace, secret: r.secret, class: o.Class.Name}
	switch {
	case r.reason == "":
		s.warned.resolved(k)
	case r.err == nil && !s.warned.first(k, r.message):
		return
	}
	if s.rec == nil || o.PodName == "" {
		return
	}
	ref := podReference(o)
	switch {
	case r.reason != "":
		s.rec.Event(ref, corev1.EventTypeWarning, EventSyncFailed, r.message)
	case len(r.changed) > 0:
		s.rec.Event(ref, corev1.EventTypeNormal, EventSynced,
			fmt.Sprintf("Secret %q updated from class %q: %s changed", r.secret, o.Class.Name, strings.Join(r.changed, ", ")))
	}
}
