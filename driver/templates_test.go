package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/keymount/keymount/internal/klogtest"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// setClass rewrites the test node's class with the template annotations
// given as fileName, text pairs.
func (n *testNode) setClass(t *testing.T, kv ...string) {
	t.Helper()
	spc := "apiVersion: secrets-store.csi.x-k8s.io/v1\nkind: SecretProviderClass\nmetadata:\n  name: app\n  annotations:\n"
	for i := 0; i+1 < len(kv); i += 2 {
		spc += "    " + strconvQuote("keymount.io/template."+kv[i]) + ": " + strconvQuote(kv[i+1]) + "\n"
	}
	spc += "spec:\n  provider: scripted\n"
	if err := os.WriteFile(filepath.Join(n.base, "spc.yaml"), []byte(spc), 0o600); err != nil {
		t.Fatal(err)
	}
}

func strconvQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

func readTarget(t *testing.T, target, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(target, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPublishTemplateFile: a keymount.io/template.<fileName> annotation on
// the class adds <fileName>, rendered from all the provider's files, to the
// volume in the same generation as them; a refresh renders it again; a
// template that stops rendering keeps the volume's files on a refresh and
// fails a first publish with InvalidArgument naming the annotation.
func TestPublishTemplateFile(t *testing.T) {
	n := newTestNode(t)
	n.setClass(t, "config.yaml", "user: {{ .user }}\npass: {{ index . \"db/pass\" }}\n")
	n.provider.files = []*v1alpha1.File{
		{Path: "user", Mode: 0o644, Contents: []byte("admin")},
		{Path: "db/pass", Mode: 0o644, Contents: []byte("pw1")},
	}
	target := n.target("secrets")
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	if got := readTarget(t, target, "config.yaml"); got != "user: admin\npass: pw1\n" {
		t.Errorf("config.yaml = %q", got)
	}
	if got := readTarget(t, target, "db/pass"); got != "pw1" {
		t.Errorf("db/pass = %q, want the provider's file kept", got)
	}
	if link, err := os.Readlink(filepath.Join(target, "config.yaml")); err != nil || link != "..data/config.yaml" {
		t.Errorf("config.yaml -> %q (%v), want ..data/config.yaml: written in the volume's generation", link, err)
	}
	if info, err := os.Stat(filepath.Join(target, "config.yaml")); err != nil || info.Mode().Perm() != defaultFileMode {
		t.Errorf("config.yaml mode = %v (%v), want %v", info.Mode().Perm(), err, os.FileMode(defaultFileMode))
	}

	n.provider.files[1].Contents = []byte("pw2")
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	if got := readTarget(t, target, "config.yaml"); got != "user: admin\npass: pw2\n" {
		t.Errorf("config.yaml after a refresh = %q, want the new password", got)
	}

	checkTemplateFailures(t, n, target)
}

// checkTemplateFailures: after a good publish of target, a template that
// stops rendering keeps its files on a refresh; a new volume's first
// publish fails with InvalidArgument; so does an invalid file name.
func checkTemplateFailures(t *testing.T, n *testNode, target string) {
	t.Helper()
	n.setClass(t, "config.yaml", "user: {{ .user }}\nport: {{ .port }}\n")
	n.provider.files[1].Contents = []byte("pw3")
	if err := n.publish(t, target); err != nil {
		t.Fatalf("republish with a failing template: %v, want OK with the files kept", err)
	}
	if got := readTarget(t, target, "config.yaml"); got != "user: admin\npass: pw2\n" {
		t.Errorf("config.yaml after a failed render = %q, want the last good one", got)
	}
	if got := readTarget(t, target, "db/pass"); got != "pw2" {
		t.Errorf("db/pass after a failed render = %q, want the old generation kept whole", got)
	}
	rec, err := n.srv.d.deps.Volumes.Lookup("csi-secrets").LoadRecord()
	if err != nil || !strings.Contains(rec.LastError, "keymount.io/template.config.yaml") {
		t.Errorf("record LastError = %q (%v), want the failing template named", rec.LastError, err)
	}

	err = n.publish(t, n.target("fresh"))
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, "keymount.io/template.config.yaml") ||
		!strings.Contains(msg, "line 2,") || !strings.Contains(msg, `"port"`) {
		t.Errorf("first publish with a failing template: %v; want InvalidArgument naming the annotation, line 2 and the key", err)
	}
	if strings.Contains(msg, "pw3") || strings.Contains(msg, "admin") {
		t.Errorf("the error %q shows a value", msg)
	}
	if _, err := os.Stat(n.target("fresh")); !os.IsNotExist(err) {
		t.Errorf("target left behind after a failed first publish (%v)", err)
	}

	n.setClass(t, "a/b", "x")
	if err := n.publish(t, n.target("badname")); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), `"keymount.io/template.a/b"`) {
		t.Errorf("an invalid file name: %v; want InvalidArgument naming the annotation", err)
	}
}

// TestWithTemplatesOverridesProviderFile: a template of a provider file's
// path replaces that file.
func TestWithTemplatesOverridesProviderFile(t *testing.T) {
	n := newTestNode(t)
	n.setClass(t, "user", "{{ .user | upper }}")
	n.provider.files = []*v1alpha1.File{{Path: "user", Mode: 0o600, Contents: []byte("admin")}}
	target := n.target("over")
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	if got := readTarget(t, target, "user"); got != "ADMIN" {
		t.Errorf("user = %q, want the template's output", got)
	}
}

// TestTemplateErrorShowsNoSecret: a template that fails with a value made
// from a secret ({{ .password | upper | fail }}) fails the first publish,
// and a refresh, with errors and logs that show neither the secret nor its
// upper-cased form, yet name the annotation, line and function.
func TestTemplateErrorShowsNoSecret(t *testing.T) {
	const secret = "hunter2-Sekret"
	logs := klogtest.Capture(t, textlogger.Verbosity(10))
	n := newTestNode(t)
	n.provider.files = []*v1alpha1.File{{Path: "password", Mode: 0o644, Contents: []byte(secret)}}
	target := n.target("secrets")
	if err := n.publish(t, target); err != nil {
		t.Fatal(err)
	}
	n.setClass(t, "dsn", "user=app\npassword={{ .password | upper | fail }}")
	refreshErr := n.publish(t, target) // a refresh: OK, the old files kept, the failure recorded
	rec, recErr := n.srv.d.deps.Volumes.Lookup("csi-secrets").LoadRecord()
	if recErr != nil {
		t.Fatal(recErr)
	}
	err := n.publish(t, n.target("fresh"))
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, `template "keymount.io/template.dsn": line 2,`) ||
		!strings.Contains(msg, "error calling fail") {
		t.Errorf("first publish: %v; want InvalidArgument naming the annotation, line 2 and fail", err)
	}
	if !strings.Contains(rec.LastError, "keymount.io/template.dsn") {
		t.Errorf("refresh (%v) recorded %q, want the failing template named", refreshErr, rec.LastError)
	}
	klog.Flush()
	if !strings.Contains(logs.String(), "keymount.io/template.dsn") {
		t.Errorf("the logs do not report the failed refresh:\n%s", logs.String())
	}
	for where, text := range map[string]string{"the first publish's error": msg, "the refresh's error": fmt.Sprint(refreshErr),
		"the volume's record": rec.LastError, "the logs": logs.String()} {
		for _, v := range []string{secret, strings.ToUpper(secret)} {
			if strings.Contains(text, v) {
				t.Errorf("%s shows %q:\n%s", where, v, text)
			}
		}
	}
}
