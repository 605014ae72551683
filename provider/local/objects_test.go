package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/server"
)

func TestParseObjects(t *testing.T) {
	tests := []struct {
		name        string
		text        string
		defaultMode os.FileMode
		want        []object
		wantErr     []string // substrings of the error, all required
	}{
		{
			name: "block string with alias and permission",
			text: `- objectName: "db/password"
  objectAlias: "password"
- objectName: "tls.crt"
  filePermission: "0600"
`,
			defaultMode: 0o644,
			want: []object{
				{name: "db/password", alias: "password", mode: 0o644},
				{name: "tls.crt", alias: "tls.crt", mode: 0o600},
			},
		},
		{
			name:        "nested alias and default mode from the request",
			text:        `[{objectName: certs/a.pem, objectAlias: tls/tls.crt}]`,
			defaultMode: 0o640,
			want:        []object{{name: "certs/a.pem", alias: "tls/tls.crt", mode: 0o640}},
		},
		{
			name: "permission spellings",
			text: `- {objectName: a, filePermission: "600"}
- {objectName: b, filePermission: "0400"}
- {objectName: c, filePermission: "0777"}
- {objectName: d, filePermission: "0"}
- {objectName: e, filePermission: ""}
- {objectName: f, filePermission: null}
`,
			defaultMode: 0o644,
			want: []object{
				{name: "a", alias: "a", mode: 0o600},
				{name: "b", alias: "b", mode: 0o400},
				{name: "c", alias: "c", mode: 0o777},
				{name: "d", alias: "d", mode: 0},
				{name: "e", alias: "e", mode: 0o644},
				{name: "f", alias: "f", mode: 0o644},
			},
		},
		{
			name: "same object under two aliases",
			text: `[{objectName: a, objectAlias: x}, {objectName: a, objectAlias: z}]`,
			want: []object{{name: "a", alias: "x"}, {name: "a", alias: "z"}},
		},
		{
			name: "objectName may start with .. when aliased",
			text: `[{objectName: ..data/key, objectAlias: key}]`,
			want: []object{{name: "..data/key", alias: "key"}},
		},
		{name: "bad YAML", text: "- objectName: [a", wantErr: []string{"objects is not valid YAML: yaml: line 1"}},
		{name: "a map, not a list", text: "objectName: a", wantErr: []string{"objects must be a YAML list of {objectName, objectAlias, filePermission}, not a map"}},
		{name: "a string, not a list", text: "tls.crt", wantErr: []string{"objects must be a YAML list", "not a string"}},
		{name: "a list of strings", text: "- objectName: a\n- tls.crt", wantErr: []string{"objects[1] must be a map", "not a string"}},
		{name: "unknown field", text: "- objectNam: a", wantErr: []string{`objects[0]: field "objectNam" is unknown to keymount-provider-local`, `"objectName", "objectAlias", "filePermission"`, "keymount.io/ignore-parameters"}},
		{name: "wrong field type", text: "- objectName: [a]", wantErr: []string{`objects: `, `objectName`}},
		{name: "empty string", text: "", wantErr: []string{"objects is empty"}},
		{name: "null", text: "null", wantErr: []string{"objects is empty"}},
		{name: "empty list", text: "[]", wantErr: []string{"objects is empty"}},
		{name: "missing objectName", text: "- objectAlias: a", wantErr: []string{"objects[0].objectName: is required"}},
		{name: "absolute objectName", text: "- objectName: /etc/shadow", wantErr: []string{`objects[0].objectName: "/etc/shadow" is absolute`}},
		{name: "dotdot objectName", text: "- objectName: ../x", wantErr: []string{`objects[0].objectName: "../x" has a ".." element`}},
		{name: "unclean objectName", text: "- objectName: a/../../x", wantErr: []string{`objects[0].objectName: "a/../../x" is not clean`}},
		{name: "dot objectName", text: "- objectName: .", wantErr: []string{`objects[0].objectName: "." names the root`}},
		{name: "absolute alias", text: "- {objectName: a, objectAlias: /x}", wantErr: []string{`objects[0].objectAlias: invalid file path "/x": path is absolute`}},
		{name: "dotdot alias", text: "- {objectName: a, objectAlias: ../x}", wantErr: []string{`objects[0].objectAlias: invalid file path "../x"`}},
		{name: "alias starting with ..", text: "- {objectName: a, objectAlias: ..data}", wantErr: []string{`objects[0].objectAlias: invalid file path "..data": first element starts with ".."`}},
		{name: "defaulted alias starting with ..", text: "- objectName: ..data/key", wantErr: []string{`objects[0].objectAlias (defaulted from objectName)`}},
		{
			name:    "bad permission",
			text:    "- objectName: a\n- objectName: b\n  filePermission: abc",
			wantErr: []string{`objects[1].filePermission: "abc" is not an octal mode like "0644"`},
		},
		{name: "0o permission", text: `- {objectName: a, filePermission: "0o600"}`, wantErr: []string{`"0o600" is not an octal mode`}},
		{name: "non-octal digit", text: `- {objectName: a, filePermission: "0800"}`, wantErr: []string{`"0800" is not an octal mode`}},
		{name: "permission above 0777", text: `- {objectName: a, filePermission: "1777"}`, wantErr: []string{`"1777" is more than 0777`}},
		{name: "negative permission", text: `- {objectName: a, filePermission: "-1"}`, wantErr: []string{`"-1" is not an octal mode`}},
		{name: "unquoted permission", text: `- {objectName: a, filePermission: 0644}`, wantErr: []string{`objects[0].filePermission: write it as a quoted octal string`}},
		{
			name:    "duplicate alias",
			text:    "- {objectName: a, objectAlias: x}\n- {objectName: b, objectAlias: x}",
			wantErr: []string{`objects[1].objectAlias: "x" is already used by objects[0]`},
		},
		{
			name:    "duplicate defaulted alias",
			text:    "- objectName: a\n- objectName: a",
			wantErr: []string{`objects[1].objectAlias: "a" is already used by objects[0]`},
		},
		{
			name:    "alias under another alias",
			text:    "- {objectName: a, objectAlias: tls}\n- {objectName: b, objectAlias: tls/tls.crt}",
			wantErr: []string{`objects[1].objectAlias: "tls/tls.crt" needs "tls" to be a directory, but objects[0] mounts a file there`},
		},
		{
			name:    "every problem is reported",
			text:    "- objectName: /a\n- {objectName: b, filePermission: x}",
			wantErr: []string{"objects[0].objectName", "objects[1].filePermission"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseObjects(tc.text, tc.defaultMode, nil)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("parseObjects = %v, want an error", got)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				if !errors.Is(err, server.ErrInvalidParameters) {
					t.Errorf("error %q does not wrap ErrInvalidParameters", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseObjects: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(object{})); diff != "" {
				t.Errorf("parseObjects (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseObjects(f *testing.F) {
	for _, seed := range []string{
		"- objectName: \"db/password\"\n  objectAlias: \"password\"\n- objectName: \"tls.crt\"\n  filePermission: \"0600\"\n",
		"[{objectName: a, objectAlias: b/c, filePermission: '0644'}]",
		"- {objectName: a, objectAlias: ../x}",
		"- {objectName: ..data/key, objectAlias: key}",
		"- {objectName: a, objectAlias: tls}\n- {objectName: b, objectAlias: tls/c}",
		"- objectName: a\n  filePermission: 0644",
		"[]",
		"",
	} {
		f.Add(seed)
	}
	const root = "/srv/root"
	f.Fuzz(func(t *testing.T, text string) {
		objs, err := parseObjects(text, 0o644, nil)
		if err != nil {
			if !errors.Is(err, server.ErrInvalidParameters) {
				t.Errorf("error %q does not wrap ErrInvalidParameters", err)
			}
			return
		}
		if len(objs) == 0 {
			t.Fatal("no error and no objects")
		}
		aliases := map[string]bool{}
		for _, o := range objs {
			if err := server.ValidatePath(o.alias); err != nil {
				t.Errorf("accepted alias: %v", err)
			}
			if j := filepath.Join(root, o.alias); !strings.HasPrefix(j, root+"/") {
				t.Errorf("alias %q leaves the volume: %s", o.alias, j)
			}
			if !filepath.IsLocal(o.name) || filepath.Clean(o.name) != o.name || o.name == "." {
				t.Errorf("accepted objectName %q is not a clean local path", o.name)
			}
			if j := filepath.Join(root, o.name); !strings.HasPrefix(j, root+"/") {
				t.Errorf("objectName %q leaves the root: %s", o.name, j)
			}
			if o.mode&^os.ModePerm != 0 {
				t.Errorf("mode %v has bits beyond 0777", o.mode)
			}
			if aliases[o.alias] {
				t.Errorf("alias %q accepted twice", o.alias)
			}
			aliases[o.alias] = true
		}
		for a := range aliases {
			for d := filepath.Dir(a); d != "."; d = filepath.Dir(d) {
				if aliases[d] {
					t.Errorf("alias %q is under alias %q", a, d)
				}
			}
		}
	})
}
