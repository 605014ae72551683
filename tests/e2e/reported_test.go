package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/tests/poll"
)

// The driver answers kubelet first and writes what it reports to the API
// server afterwards: pod statuses and synced Secrets are written from a
// queue of its own (coalesced per volume, retried with backoff), events are
// queued by client-go. A test therefore waits for what it expects to see
// (waitForStatus, waitForStatusGone, waitForSecret). A test that checks
// that something was NOT written first waits for proof that the driver
// handled the outcome at hand: the state it expects, a request of the
// driver in the audit log (waitForRequest) or the driver's own log line
// about the pod status (waitForStatusLogged).

// reportTimeout bounds waits for what the driver writes after answering
// kubelet: a bound, not a target.
const reportTimeout = 60 * time.Second

// statusCheck judges a pod status; nil accepts it.
type statusCheck func(*secretsstorev1.SecretProviderClassPodStatus) error

// waitForStatus waits until the pod status of pod's volume of class exists
// and every check accepts it, and returns it. When that does not happen the
// test fails with the checks' last answers: at once when there is no
// status, else with the last status returned.
func (s *suite) waitForStatus(t *testing.T, pod *corev1.Pod, class string, checks ...statusCheck) *secretsstorev1.SecretProviderClassPodStatus {
	t.Helper()
	var st *secretsstorev1.SecretProviderClassPodStatus
	err := poll.Check(t.Context(), reportTimeout, func(context.Context) error {
		if st = s.podStatus(t, pod, class); st == nil {
			return errors.New("there is none")
		}
		var errs []error
		for _, c := range checks {
			errs = append(errs, c(st))
		}
		return errors.Join(errs...)
	})
	switch {
	case err != nil && st == nil:
		t.Fatalf("no pod status %s/%s: %v", pod.Namespace, statusName(pod, class), err)
	case err != nil:
		t.Errorf("pod status %s/%s: %v", pod.Namespace, st.Name, err)
	}
	return st
}

// waitForStatusGone waits until the pod status of pod's volume of class is
// gone, and fails the test if it is not; after names what should have
// removed it.
func (s *suite) waitForStatusGone(t *testing.T, pod *corev1.Pod, class, after string) {
	t.Helper()
	err := poll.Check(t.Context(), reportTimeout, func(context.Context) error {
		if st := s.podStatus(t, pod, class); st != nil {
			return fmt.Errorf("resourceVersion %s", st.ResourceVersion)
		}
		return nil
	})
	if err != nil {
		t.Errorf("pod status %s/%s still exists after %s: %v", pod.Namespace, statusName(pod, class), after, err)
	}
}

// conditionIs accepts a pod status whose condition typ has status want, and
// whose message holds every string of contains.
func conditionIs(typ string, want metav1.ConditionStatus, contains ...string) statusCheck {
	return func(st *secretsstorev1.SecretProviderClassPodStatus) error {
		c := condition(st, typ)
		if c == nil || c.Status != want || !containsAll(c.Message, contains) {
			return fmt.Errorf("condition %s = %+v, want %s with a message holding %q", typ, c, want, contains)
		}
		return nil
	}
}

// secretCheck judges a Secret; nil accepts it.
type secretCheck func(*corev1.Secret) error

// waitForSecret waits until Secret namespace/name exists and every check
// accepts it, and returns it. When that does not happen the test fails with
// the checks' last answers: at once when there is no Secret, else with the
// last Secret returned.
func (s *suite) waitForSecret(t *testing.T, namespace, name string, checks ...secretCheck) *corev1.Secret {
	t.Helper()
	var sec *corev1.Secret
	err := poll.Check(t.Context(), reportTimeout, func(context.Context) error {
		if sec = s.secret(t, namespace, name); sec == nil {
			return errors.New("there is none")
		}
		var errs []error
		for _, c := range checks {
			errs = append(errs, c(sec))
		}
		return errors.Join(errs...)
	})
	switch {
	case err != nil && sec == nil:
		t.Fatalf("Secret %s/%s was not synced: %v", namespace, name, err)
	case err != nil:
		t.Errorf("Secret %s/%s: %v", namespace, name, err)
	}
	return sec
}

// hasData accepts a Secret whose data is exactly want.
func hasData(want map[string][]byte) secretCheck {
	return func(sec *corev1.Secret) error {
		if len(sec.Data) != len(want) {
			return fmt.Errorf("data keys %v, want %v", slices.Sorted(maps.Keys(sec.Data)), slices.Sorted(maps.Keys(want)))
		}
		for k, v := range want {
			got, ok := sec.Data[k]
			if !ok || !bytes.Equal(got, v) {
				return fmt.Errorf("data key %q is not the expected value", k) // never print a value
			}
		}
		return nil
	}
}

// waitForRequest waits until the audit log shows, after mark (see
// auditMark), a request of user that match accepts, and returns it.
func (s *suite) waitForRequest(t *testing.T, user, mark, what string, match func(auditv1.Event) bool) auditv1.Event {
	t.Helper()
	var found auditv1.Event
	err := poll.Check(t.Context(), reportTimeout, func(context.Context) error {
		events := s.env.AuditEvents(t)
		start := markIndex(events, mark)
		if start < 0 {
			return fmt.Errorf("audit mark %s not found among %d events", mark, len(events))
		}
		for _, e := range requestsOf(events[start:], user) {
			if match(e) {
				found = e
				return nil
			}
		}
		return errors.New("no such request")
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return found
}

// aboutStatus matches a request about the pod status of pod's volume of
// class.
func aboutStatus(pod *corev1.Pod, class string) func(auditv1.Event) bool {
	return func(e auditv1.Event) bool {
		r := e.ObjectRef
		return r != nil && r.Resource == "secretproviderclasspodstatuses" && r.Namespace == pod.Namespace &&
			r.Name == statusName(pod, class)
	}
}

// statusLogVerbosity is the least verbosity at which the driver logs a pod
// status it found unchanged.
const statusLogVerbosity = 5

// logMark is the current end of the driver's log: waitForStatusLogged
// reads what the driver logs after it. A restarted driver appends to the
// same file.
func (n *node) logMark(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(n.driverLog)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// waitForStatusLogged waits until the driver logs, after mark, one of the
// given messages about the pod status of pod's volume of class, and returns
// the message. This is how a test knows the driver handled an outcome that
// writes nothing (it logs "pod status unchanged" at -v=5, the status
// created, updated or deleted at -v=2, a status of another pod kept at
// -v=2): no API request shows it.
func (n *node) waitForStatusLogged(t *testing.T, mark int64, pod *corev1.Pod, class string, messages ...string) string {
	t.Helper()
	if v, err := strconv.Atoi(strings.TrimPrefix(logVerbosity, "-v=")); err != nil || v < statusLogVerbosity {
		t.Fatalf("the driver runs at %s: it logs what it did with a pod status from -v=%d", logVerbosity, statusLogVerbosity)
	}
	quoted := make([]string, 0, len(messages))
	for _, m := range messages {
		quoted = append(quoted, regexp.QuoteMeta(strconv.Quote(m)))
	}
	re := regexp.MustCompile(`(` + strings.Join(quoted, "|") + `) podStatus=` +
		regexp.QuoteMeta(strconv.Quote(pod.Namespace+"/"+statusName(pod, class))))
	var got string
	err := poll.Check(t.Context(), reportTimeout, func(context.Context) error {
		f, err := os.Open(n.driverLog)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		data, err := io.ReadAll(io.NewSectionReader(f, mark, 1<<40))
		if err != nil {
			return err
		}
		m := re.FindSubmatch(data)
		if m == nil {
			return fmt.Errorf("no line matches %s", re)
		}
		got, err = strconv.Unquote(string(m[1]))
		return err
	})
	if err != nil {
		t.Fatalf("waiting for the driver to log what it did with pod status %s/%s: %v", pod.Namespace, statusName(pod, class), err)
	}
	return got
}
