package secretobjects

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The content stamp of a synced Secret: when a provider answered with the
// content the Secret holds, and on which node. keymount writes it with the
// content and compares it before writing new content, so that a node never
// rolls a Secret back to older content than another node synced.
const (
	// ContentTimeAnnotation is when the provider answered with the content
	// (the volume's last successful refresh), RFC 3339 with nanoseconds, UTC.
	ContentTimeAnnotation = "keymount.io/content-time"
	// ContentNodeAnnotation is the node whose volume had that answer.
	ContentNodeAnnotation = "keymount.io/content-node"
	// DefaultSettle is how much later than the stamp another node's answer
	// must be to replace the content. Object versions are opaque (an AWS
	// version id says nothing about its age), so only the answer time can
	// order two answers; but a provider may answer from a cache (the
	// keymount AWS provider shares a value for 30s by default) and node
	// clocks differ a little, so an answer less than this later than the
	// stamp may hold older content and is not written.
	DefaultSettle = 2 * time.Minute
)

// stamp is when and where a provider answered with some content.
type stamp struct {
	node string
	at   time.Time // zero: unknown
}

// recordedStamp reads the stamp of cur; zero when there is none or it does
// not parse. A stamp is never later than the last write of NodeFieldManager,
// which recorded it, by the API server's clock (the time of its managed
// fields entry), so a node whose clock runs ahead cannot hold the Secret for
// longer than a node whose clock is right would.
func recordedStamp(cur *corev1.Secret) stamp {
	at, err := time.Parse(time.RFC3339Nano, cur.Annotations[ContentTimeAnnotation])
	if err != nil {
		return stamp{}
	}
	var written time.Time
	for _, e := range cur.ManagedFields {
		if e.Manager == NodeFieldManager && e.Subresource == "" && e.Time != nil && e.Time.After(written) {
			written = e.Time.Time
		}
	}
	// managed fields times have whole seconds
	if !written.IsZero() && at.After(written.Add(time.Second)) {
		at = written.Add(time.Second)
	}
	return stamp{node: cur.Annotations[ContentNodeAnnotation], at: at}
}

// annotations are the annotations that record st; none when its time is
// unknown.
func (st stamp) annotations() map[string]string {
	if st.at.IsZero() {
		return nil
	}
	return map[string]string{ContentTimeAnnotation: st.at.UTC().Format(time.RFC3339Nano), ContentNodeAnnotation: st.node}
}

// mayReplace reports whether content answered at st may replace content
// stamped rec: always when rec is unknown; from the same node, when st is
// not older; from another node, when st is at least settle later.
func (st stamp) mayReplace(rec stamp, settle time.Duration) bool {
	switch {
	case rec.at.IsZero():
		return true
	case st.at.IsZero():
		return false
	case st.node == rec.node:
		return !st.at.Before(rec.at)
	}
	return !st.at.Before(rec.at.Add(settle))
}

// keptMessage says why content answered at mine did not replace the
// content of Secret name, stamped rec.
func keptMessage(name string, mine, rec stamp, settle time.Duration) string {
	held := fmt.Sprintf("Secret %q keeps the content node %q synced from its provider's answer at %s", name, rec.node, formatTime(rec.at))
	switch {
	case mine.at.IsZero():
		return held + ": the time of this volume's answer is unknown"
	case mine.at.Before(rec.at):
		return fmt.Sprintf("%s, newer than this volume's (%s)", held, formatTime(mine.at))
	}
	return fmt.Sprintf("%s: this volume's answer at %s is less than %s later, too close to tell which is newer "+
		"(a provider may answer from a cache); a refresh from %s on syncs it", held, formatTime(mine.at), settle, formatTime(rec.at.Add(settle)))
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
