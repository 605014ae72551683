package local

import (
	"errors"
	"strings"
	"testing"

	"github.com/keymount/keymount/provider/server"
)

// TestAllowedNamespaces: a provider confined to namespaces serves their
// pods and refuses every other request with PermissionDenied before it
// reads a file; one without a list serves every namespace.
func TestAllowedNamespaces(t *testing.T) {
	root := newRoot(t)
	confined, err := New(root, WithAllowedNamespaces("shop", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	open, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	if got := confined.AllowedNamespaces(); strings.Join(got, ",") != "demo,shop" {
		t.Errorf("AllowedNamespaces = %q", got)
	}
	if got := open.AllowedNamespaces(); got != nil {
		t.Errorf("AllowedNamespaces without a list = %q, want nil", got)
	}
	tests := []struct {
		name      string
		p         *Provider
		namespace *string // nil: the key is absent
		objects   string
		want      string // in a PermissionDenied error; "" for served
	}{
		{name: "an allowed namespace", p: confined, namespace: new("shop"), objects: "- objectName: db/password"},
		{name: "the other allowed namespace", p: confined, namespace: new("demo"), objects: "- objectName: db/password"},
		{name: "another namespace", p: confined, namespace: new("attacker"), objects: "- objectName: db/password",
			want: `namespace "attacker" may not mount files of this provider: it serves only namespaces demo, shop`},
		// Refused before the objects are even parsed or opened.
		{name: "another namespace, a missing object", p: confined, namespace: new("attacker"), objects: "- objectName: nope",
			want: `namespace "attacker" may not mount`},
		{name: "an empty namespace", p: confined, namespace: new(""), objects: "- objectName: db/password", want: "names no pod namespace"},
		{name: "no namespace", p: confined, objects: "- objectName: db/password", want: "names no pod namespace"},
		{name: "a prefix of an allowed one", p: confined, namespace: new("sho"), objects: "- objectName: db/password", want: `namespace "sho"`},
		{name: "no list: any namespace", p: open, namespace: new("attacker"), objects: "- objectName: db/password"},
		{name: "no list: no namespace", p: open, objects: "- objectName: db/password"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]string{"objects": tc.objects}
			if tc.namespace != nil {
				attrs[attrPodNamespace] = *tc.namespace
			}
			res, err := tc.p.Mount(t.Context(), &server.MountRequest{Attributes: attrs, Permission: 0o644})
			if tc.want == "" {
				if err != nil || len(res.Files) != 1 || string(res.Files[0].Contents) != password {
					t.Fatalf("Mount = %+v, %v; want the file", res, err)
				}
				return
			}
			if !errors.Is(err, server.ErrPermissionDenied) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Mount error %v, want PermissionDenied saying %q", err, tc.want)
			}
			if res != nil || strings.Contains(err.Error(), password) {
				t.Errorf("a refused mount returned %+v / leaked contents in %q", res, err)
			}
		})
	}
}

func TestAllowedNamespacesInvalid(t *testing.T) {
	for _, ns := range []string{"Shop", "a_b", "-x", strings.Repeat("a", 64), "a/b"} {
		if _, err := New(newRoot(t), WithAllowedNamespaces("ok", ns)); err == nil || !strings.Contains(err.Error(), "is not a namespace name") {
			t.Errorf("WithAllowedNamespaces(%q) = %v, want an error naming it", ns, err)
		}
	}
}
