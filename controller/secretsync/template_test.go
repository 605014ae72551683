package secretsync

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ss1 "github.com/keymount/keymount/apis/secretsync/v1alpha1"
	secretsstorev1 "github.com/keymount/keymount/apis/v1"
	"github.com/keymount/keymount/controller/synchash"
)

func withTemplates(ss *ss1.SecretSync, kv ...string) *ss1.SecretSync {
	ss.Annotations = map[string]string{"other": "x"}
	for i := 0; i+1 < len(kv); i += 2 {
		ss.Annotations["keymount.io/template."+kv[i]] = kv[i+1]
	}
	return ss
}

// TestTemplateContent: a template annotation renders from every file the
// provider returned (not only the spec's sourcePaths) into its key, and
// overrides a spec key of the same name.
func TestTemplateContent(t *testing.T) {
	ss := withTemplates(spec("Opaque", "user", "user", "pass", "dsn"),
		"dsn", `postgresql://{{ .user }}:{{ .pass }}@{{ index . "db/host" }}/app`,
		"config.json", `{{ toJson (dict "user" .user) }}`)
	c, err := desiredContent(ss, files("user", "admin", "pass", "s3cr3t", "db/host", "db.example"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"user": "admin", "dsn": "postgresql://admin:s3cr3t@db.example/app", "config.json": `{"user":"admin"}`}
	if len(c.data) != len(want) {
		t.Errorf("data has %d keys, want %d", len(c.data), len(want))
	}
	for k, v := range want {
		if string(c.data[k]) != v {
			t.Errorf("data[%s] = %q, want %q", k, c.data[k], v)
		}
	}
	secret := &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}, ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ss1.LabelSecretSync: ""}}}
	for k, v := range c.data {
		secret.Data[k] = v
	}
	if !currentContent(ss, secret).equal(c) {
		t.Error("the Secret holding the rendered content does not compare equal: every round would write")
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations []string
		want        string
	}{
		{"missing key", []string{"dsn", "user={{ .user }}\npass={{ .password }}"}, `"password"`},
		{"line", []string{"dsn", "user={{ .user }}\npass={{ .password }}"}, "line 2,"},
		{"bad target", []string{"a b", "x"}, `"keymount.io/template.a b"`},
		{"parse", []string{"k", "{{ nosuch .user }}"}, `function "nosuch" not defined`},
		{"function", []string{"k", "{{ b64dec .user }}"}, "b64dec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := withTemplates(spec("Opaque", "user", "user"), tc.annotations...)
			_, err := desiredContent(ss, files("user", "admin-value"))
			if !errors.Is(err, errTemplate) {
				t.Fatalf("desiredContent error = %v, want errTemplate", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "keymount.io/template.") {
				t.Errorf("error %q lacks %s or the annotation", err, tc.want)
			}
			if strings.Contains(err.Error(), "admin-value") {
				t.Errorf("error %q shows a value", err)
			}
		})
	}
}

// TestTemplateInHash: changing a template's text changes the syncHash
// (the generation does not move on an annotation change); a SecretSync
// without templates hashes as before templates existed.
func TestTemplateInHash(t *testing.T) {
	h, err := synchash.New([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	class := &secretsstorev1.SecretProviderClass{ObjectMeta: metav1.ObjectMeta{UID: "c1", Generation: 1}}
	c := &content{typ: corev1.SecretTypeOpaque, data: map[string][]byte{"k": []byte("v")}}
	plain := spec("Opaque", "a", "k")
	noTemplates := hashContent(plain, class, c)
	if noTemplates.Templates != nil {
		t.Errorf("Templates = %v without template annotations", noTemplates.Templates)
	}
	a := h.Sum(hashContent(withTemplates(spec("Opaque", "a", "k"), "k", "{{ .a }}"), class, c))
	b := h.Sum(hashContent(withTemplates(spec("Opaque", "a", "k"), "k", "{{ .a | upper }}"), class, c))
	if a == b || a == h.Sum(noTemplates) {
		t.Error("the syncHash does not change with the template text")
	}
}
