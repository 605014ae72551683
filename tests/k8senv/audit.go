package k8senv

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// auditPolicy logs every request, at every stage, at the Metadata level:
// who did what to which object and the answer's status, no bodies (no
// Secret data or token ever reaches the log).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
`

// configureAudit writes the policy under dir and points kube-apiserver's
// audit flags at it. It returns the log's path.
func configureAudit(t testing.TB, dir string, args *envtest.Arguments) string {
	t.Helper()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatalf("k8senv: %v", err)
	}
	log := filepath.Join(dir, "logs", "audit.jsonl")
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", log)
	args.Set("audit-log-format", "json")
	// Blocking: an event is on disk before the request goes on, so it is
	// there once the client has its answer (RequestReceived, at least; the
	// ResponseComplete event follows the answer by a moment).
	args.Set("audit-log-mode", "blocking")
	return log
}

// AuditEvents returns the events kube-apiserver has logged so far, oldest
// first. The environment must have been started with Options.AuditLog.
func (e *Env) AuditEvents(t testing.TB) []auditv1.Event {
	t.Helper()
	if e.auditLog == "" {
		t.Fatal("k8senv: AuditEvents needs an environment started with Options{AuditLog: true}")
	}
	data, err := os.ReadFile(e.auditLog)
	if err != nil {
		t.Fatalf("k8senv: reading the audit log: %v", err)
	}
	// A line still being written has no newline yet: leave it for the next call.
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var events []auditv1.Event
	for line := range bytes.Lines(data) {
		var ev auditv1.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("k8senv: audit log line %d: %v", len(events)+1, err)
		}
		events = append(events, ev)
	}
	return events
}
