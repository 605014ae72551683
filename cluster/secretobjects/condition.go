package secretobjects

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
)

// maxMessage bounds the condition message (the API allows 32768 bytes).
const maxMessage = 32 * 1024

// result is what syncing one secretObject came to.
type result struct {
	secret string
	// reason is "" when the Secret is synced; a condition reason otherwise.
	reason  string
	message string
	// err is an API failure the next sync may not have: it is returned to
	// the caller. Problems only a change of the class or the cluster fixes
	// have no err.
	err error
	// created and changed say the Secret was created or its data changed;
	// changed lists the keys.
	created bool
	changed []string
	// kept says why the Secret keeps content another node synced instead
	// of this volume's; "" when it holds this volume's.
	kept string
	// unchanged says the sync wrote nothing: the Secret held what it
	// should.
	unchanged bool
}

func failure(secret, reason, message string) result {
	return result{secret: secret, reason: reason, message: message}
}

// condition sums up the results: True when every Secret is synced (reason
// ContentKept when one keeps another node's content), else False with the
// reason of the first failure and every failure's message.
func condition(results []result) (*metav1.Condition, error) {
	c := &metav1.Condition{Type: secretsstorev1.ConditionSecretsSynced, LastTransitionTime: metav1.Now()}
	var synced, kept, failed []string
	var errs []error
	for _, r := range results {
		switch {
		case r.reason == "" && r.kept != "":
			kept = append(kept, r.kept)
		case r.reason == "":
			synced = append(synced, fmt.Sprintf("%q", r.secret))
		default:
			if c.Reason == "" {
				c.Reason = r.reason
			}
			failed = append(failed, r.message)
			if r.err != nil {
				errs = append(errs, r.err)
			}
		}
	}
	switch {
	case len(failed) > 0:
		c.Status = metav1.ConditionFalse
		c.Message = strings.Join(failed, "; ")
	case len(kept) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonContentKept
		if len(synced) > 0 {
			kept = append(kept, "Secrets "+strings.Join(synced, ", ")+" match the mounted files")
		}
		c.Message = strings.Join(kept, "; ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonSynced
		c.Message = "Secrets " + strings.Join(synced, ", ") + " match the mounted files"
	}
	if len(c.Message) > maxMessage {
		c.Message = strings.ToValidUTF8(c.Message[:maxMessage-3], "") + "..."
	}
	return c, errors.Join(errs...)
}
