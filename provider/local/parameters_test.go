package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/keymount/keymount/internal/classparams"
	"github.com/keymount/keymount/provider/server"
)

// TestMountRefusesUnknownKeys: a class parameter or object field the local
// provider does not read fails the mount with ErrInvalidParameters naming
// it and the accepted ones, never its value; kubelet's keys, the class name
// and what the class lists under keymount.io/ignore-parameters pass.
func TestMountRefusesUnknownKeys(t *testing.T) {
	p, err := New(newRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	const objects = "- objectName: tls.crt\n"
	for _, tc := range []struct {
		name  string
		attrs map[string]string
		want  []string // in the error; none for accepted
	}{
		{name: "driver's keys", attrs: map[string]string{
			"secretProviderClass": "spc", "csi.storage.k8s.io/pod.namespace": "ns", "csi.storage.k8s.io/ephemeral": "true",
			"csi.storage.k8s.io/serviceAccount.tokens": "{}", "csi.storage.k8s.io/anything-new": "x"}},
		{name: "an unknown parameter", attrs: map[string]string{"root": "/etc/secret-value"},
			want: []string{`parameter "root" is unknown to keymount-provider-local`, `reads only "objects"`, classparams.IgnoreKey}},
		{name: "every unknown parameter, in order", attrs: map[string]string{"zz": "1", "aa": "2"},
			want: []string{`parameter "aa", "zz"`}},
		{name: "an ignored parameter", attrs: map[string]string{"root": "/", classparams.IgnoreKey: "root"}},
		{name: "an unknown object field", attrs: map[string]string{"objects": objects + "  objectVersion: secret-value\n"},
			want: []string{`objects[0]: field "objectVersion" is unknown to keymount-provider-local`, `"objectName", "objectAlias", "filePermission"`}},
		{name: "an ignored object field", attrs: map[string]string{
			"objects": objects + "  objectVersion: \"3\"\n  filePermission: \"0600\"\n", classparams.IgnoreKey: "objectVersion"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]string{"objects": objects}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			res, err := p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Mount: %v, want accepted", err)
				}
				if len(res.Files) != 1 || string(res.Files[0].Contents) != "CERT" {
					t.Errorf("files %v, want tls.crt", res.Files)
				}
				return
			}
			if !errors.Is(err, server.ErrInvalidParameters) {
				t.Fatalf("Mount: %v, want ErrInvalidParameters", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Errorf("error %q quotes a value", err)
			}
		})
	}
}

// TestIgnoredFieldKeepsMode: an object field dropped because the class
// ignores it leaves the object's other fields as written.
func TestIgnoredFieldKeepsMode(t *testing.T) {
	objs, err := parseObjects("- {objectName: a, objectAlias: b, filePermission: \"0600\", newField: x}", 0o644, map[string]bool{"newField": true})
	if err != nil || len(objs) != 1 || objs[0] != (object{name: "a", alias: "b", mode: 0o600}) {
		t.Fatalf("parseObjects = %+v, %v; want a as b, 0600", objs, err)
	}
}
