package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/textlogger"
)

// klogLines returns what klog's text format writes for one log call.
func klogLines(t *testing.T, msg string, kv ...any) string {
	t.Helper()
	var buf bytes.Buffer
	textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))).Info(msg, kv...)
	return buf.String()
}

// TestScanLog plants secret values, spelled as the binaries' klog output
// would spell them, after two lines of noise, and checks that the scanner
// reports each on its line, by label, and nothing in a clean log.
func TestScanLog(t *testing.T) {
	plain := "plain-" + randomHex(8)
	quoted := `pa"ss\word-` + randomHex(8)
	pem := "-----BEGIN KEY-----\n" + randomHex(24) + "\n" + randomHex(24) + "\n-----END KEY-----\n"
	secrets := []secretValue{{"the plain value", plain}, {"the quoted value", quoted}, {"the PEM value", pem}, {"a short value", "short"}}
	jsonBody := func(v string) string {
		b, err := json.Marshal(map[string]any{"kind": "Secret", "data": map[string]string{"k": v}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	noise := klogLines(t, "starting", "node", "n1") + klogLines(t, "synced caches", "objects", 3)
	for _, tc := range []struct {
		name string
		log  string
		want []logHit
	}{
		{"clean", noise + klogLines(t, "published", "targetPath", "/var/lib/kubelet/pods/x/mount", "other", "plain-"+randomHex(8)), nil},
		{"as is", noise + klogLines(t, "request", "secrets", map[string]string{"k": plain}),
			[]logHit{{"f", 3, "the plain value", "as is"}}},
		{"base64 in a body", noise + klogLines(t, "Request Body", "body", jsonBody(base64.StdEncoding.EncodeToString([]byte(plain)))),
			[]logHit{{"f", 3, "the plain value", "base64"}}},
		{"Go-quoted", noise + klogLines(t, "mount", "value", quoted),
			[]logHit{{"f", 3, "the quoted value", "JSON-escaped or Go-quoted"}}},
		{"in a JSON body", noise + klogLines(t, "Response Body", "body", jsonBody(quoted)),
			[]logHit{{"f", 3, "the quoted value", "JSON-escaped, then Go-quoted"}}},
		{"klog multi-line", noise + klogLines(t, "file", "content", pem),
			[]logHit{{"f", 4, "the PEM value", "klog multi-line"}}},
		{"hex dump", noise + klogLines(t, "Response Body", "body", hex.Dump([]byte("\x00\x01k8s"+plain+"\x00"))),
			[]logHit{{"f", 4, "the plain value", "as is in a hex dump"}}},
		{"short value", noise + klogLines(t, "mount", "mode", "short"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "driver.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			x := newNeedleIndex(secrets)
			if x.values != 3 || x.short != 1 {
				t.Errorf("indexed %d values and skipped %d, want 3 and 1 (the short one)", x.values, x.short)
			}
			hits, n, err := scanLog(path, "f", x)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.log) {
				t.Errorf("scanned %d bytes, want %d", n, len(tc.log))
			}
			if diff := cmp.Diff(tc.want, hits, cmp.AllowUnexported(logHit{})); diff != "" {
				t.Errorf("hits (-want +got):\n%s\nlog:\n%s", diff, tc.log)
			}
		})
	}
}

// TestScanLogs checks the suite-wide verdict: a hit fails it, naming the
// file, the line and the label but never the value; a clean log passes; no
// value or no byte of log fails, since such a scan proves nothing.
func TestScanLogs(t *testing.T) {
	root := t.TempDir()
	token := "token-" + randomHex(16)
	secrets := []secretValue{{"the token of pod ns/app", token}}
	write := func(name, content string) string {
		path := filepath.Join(root, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	clean := write("clean.log", klogLines(t, "published", "volumeID", "csi-1"))
	leaky := write("leaky.log", klogLines(t, "published", "volumeID", "csi-1")+klogLines(t, "request", "token", token))
	empty := write("empty.log", "")

	for _, tc := range []struct {
		name    string
		paths   []string
		secrets []secretValue
		want    string // in the error; "" for none
	}{
		{"clean", []string{clean, empty}, secrets, ""},
		{"hit", []string{clean, leaky}, secrets, "leaky.log:2: the token of pod ns/app (as is)"},
		{"no secret", []string{clean}, []secretValue{{"short", "short"}}, "no secret value of at least 8 bytes"},
		{"no log", nil, secrets, "scanned 0 bytes of log in 0 file(s)"},
		{"empty log", []string{empty}, secrets, "scanned 0 bytes of log in 1 file(s)"},
		{"missing log", []string{clean, filepath.Join(root, "gone.log")}, secrets, "reading log gone.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := scanLogs(io.Discard, root, tc.paths, tc.secrets)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("scanLogs = %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("scanLogs = %v, want an error holding %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), token):
				t.Errorf("scanLogs printed the secret value: %v", err)
			}
		})
	}
}
