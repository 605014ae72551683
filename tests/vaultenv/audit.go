package vaultenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// AuditEntry is one response entry of Vault's file audit log (secrets in it
// are HMAC'd by Vault).
type AuditEntry struct {
	Type    string `json:"type"`
	Error   string `json:"error"`
	Request struct {
		Operation string `json:"operation"`
		Path      string `json:"path"`
	} `json:"request"`
}

// Entries are the audit log's response entries, in order.
type Entries []AuditEntry

// Audit reads the audit log. Vault writes an entry before it answers, so
// every request answered so far is in it; a last line not ended yet (a
// request answered meanwhile, while other clients such as a controller
// under test use Vault) is left out.
func (v *Vault) Audit(t testing.TB) Entries {
	t.Helper()
	raw, err := os.ReadFile(v.auditLog)
	if err != nil {
		t.Fatalf("vault audit log: %v", err)
	}
	// A request being answered now may be half written: its line is not
	// ended yet.
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	var out Entries
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("vault audit log line: %v", err)
		}
		if e.Type == "response" {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Count is how many successful requests of operation (create, read,
// update, delete, list) on a path starting with prefix the log holds.
func (es Entries) Count(operation, prefix string) int {
	n := 0
	for _, e := range es {
		if e.Error == "" && e.Request.Operation == operation && strings.HasPrefix(e.Request.Path, prefix) {
			n++
		}
	}
	return n
}
