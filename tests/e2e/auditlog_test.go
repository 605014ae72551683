package e2e

import (
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// markNamespace holds the marks: it does not exist, which does not matter.
const markNamespace = "default"

// auditMark makes a request the audit log records (a GET of a ConfigMap
// that does not exist, by the administrator) and returns its name, to find
// the requests logged before and after it. The log is written before the
// API server answers, so the mark is in the log when auditMark returns.
func (s *suite) auditMark(t *testing.T) string {
	t.Helper()
	name := "audit-mark-" + randomHex(8)
	_, err := s.kube.CoreV1().ConfigMaps(markNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("audit mark %s: want NotFound, got %v", name, err)
	}
	return name
}

// requestsBetween returns the requests of user logged between two marks,
// one entry per request (its first stage).
func (s *suite) requestsBetween(t *testing.T, user, from, to string) []auditv1.Event {
	t.Helper()
	events := s.env.AuditEvents(t)
	start, end := markIndex(events, from), markIndex(events, to)
	if start < 0 || end < 0 {
		t.Fatalf("audit marks %s (%d), %s (%d) not found among %d events", from, start, to, end, len(events))
	}
	return requestsOf(events[start:end], user)
}

func markIndex(events []auditv1.Event, mark string) int {
	return slices.IndexFunc(events, func(e auditv1.Event) bool {
		return e.ObjectRef != nil && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == mark
	})
}

// requestsOf keeps the events of user, the last stage of each request (so
// a finished request carries its response status).
func requestsOf(events []auditv1.Event, user string) []auditv1.Event {
	index := map[string]int{}
	var out []auditv1.Event
	for _, e := range events {
		if e.User.Username != user {
			continue
		}
		if i, ok := index[string(e.AuditID)]; ok {
			out[i] = e
			continue
		}
		index[string(e.AuditID)] = len(out)
		out = append(out, e)
	}
	return out
}

// isWrite reports whether a request changes an object.
func isWrite(e auditv1.Event) bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// describe is a request in one line, for messages.
func describe(e auditv1.Event) string {
	code := int32(0)
	if e.ResponseStatus != nil {
		code = e.ResponseStatus.Code
	}
	return fmt.Sprintf("%s %s -> %d", e.Verb, e.RequestURI, code)
}
