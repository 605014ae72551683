package server

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/v1alpha1"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name    string
		req     *v1alpha1.MountRequest
		want    *MountRequest
		wantErr string
	}{
		{
			name: "full",
			req: &v1alpha1.MountRequest{
				Attributes: `{"a":"1","csi.storage.k8s.io/serviceAccount.tokens":"{\"sts\":{\"token\":\"t\"}}"}`,
				Secrets:    `{"k":"v"}`,
				TargetPath: "/t",
				Permission: "384",
				CurrentObjectVersion: []*v1alpha1.ObjectVersion{
					{Id: "a", Version: "1"}, {Id: "b", Version: "2"},
				},
			},
			want: &MountRequest{
				Attributes:      map[string]string{"a": "1", "csi.storage.k8s.io/serviceAccount.tokens": `{"sts":{"token":"t"}}`},
				Secrets:         map[string]string{"k": "v"},
				TargetPath:      "/t",
				Permission:      0o600,
				CurrentVersions: map[string]string{"a": "1", "b": "2"},
			},
		},
		{
			name: "defaults",
			req:  &v1alpha1.MountRequest{Attributes: `{}`},
			want: &MountRequest{
				Attributes: map[string]string{}, Secrets: map[string]string{},
				Permission: 0o644, CurrentVersions: map[string]string{},
			},
		},
		{
			name: "null objects",
			req:  &v1alpha1.MountRequest{Attributes: `null`, Secrets: `null`, Permission: "0"},
			want: &MountRequest{
				Attributes: map[string]string{}, Secrets: map[string]string{},
				Permission: 0, CurrentVersions: map[string]string{},
			},
		},
		{name: "attributes empty", req: &v1alpha1.MountRequest{}, wantErr: "attributes is not a JSON object of strings"},
		{name: "attributes an array", req: &v1alpha1.MountRequest{Attributes: `["a"]`}, wantErr: "attributes is not"},
		{name: "secrets not strings", req: &v1alpha1.MountRequest{Attributes: `{}`, Secrets: `{"k":{"v":1}}`}, wantErr: "secrets is not"},
		{name: "permission negative", req: &v1alpha1.MountRequest{Attributes: `{}`, Permission: "-1"}, wantErr: "permission"},
		{name: "permission octal string", req: &v1alpha1.MountRequest{Attributes: `{}`, Permission: "0o644"}, wantErr: "permission"},
		{name: "permission with type bits", req: &v1alpha1.MountRequest{Attributes: `{}`, Permission: fmt.Sprint(uint32(os.ModeDir | 0o644))}, wantErr: "permission"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRequest(tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseRequest = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRequest: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseRequest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrorsDoNotQuoteSecrets(t *testing.T) {
	for _, secrets := range []string{`{"token":"TOPSECRET`, `{"token":TOPSECRET}`, `{"token":["TOPSECRET"]}`} {
		_, err := parseRequest(&v1alpha1.MountRequest{Attributes: `{}`, Secrets: secrets})
		if err == nil {
			t.Fatalf("secrets %s parsed", secrets)
		}
		if strings.Contains(err.Error(), "TOPSECRET") || strings.Contains(err.Error(), "TOP") {
			t.Errorf("error %q quotes the secrets", err)
		}
	}
}

func TestMountRequestStringRedacts(t *testing.T) {
	req := &MountRequest{
		Attributes:      map[string]string{"objects": "ATTRVALUE", "csi.storage.k8s.io/serviceAccount.tokens": "TOKENVALUE"},
		Secrets:         map[string]string{"SECRETKEY": "SECRETVALUE"},
		TargetPath:      "/target",
		Permission:      0o640,
		CurrentVersions: map[string]string{"a": "1"},
	}
	for _, format := range []string{"%v", "%+v", "%s", "%#v"} {
		for _, arg := range []any{req, *req, []*MountRequest{req}} {
			out := fmt.Sprintf(format, arg)
			for _, leak := range []string{"ATTRVALUE", "TOKENVALUE", "SECRETKEY", "SECRETVALUE"} {
				if strings.Contains(out, leak) {
					t.Errorf("Sprintf(%q, %T) = %s: leaks %s", format, arg, out, leak)
				}
			}
			for _, want := range []string{"objects", "csi.storage.k8s.io/serviceAccount.tokens", "/target", "0640"} {
				if !strings.Contains(out, want) {
					t.Errorf("Sprintf(%q, %T) = %s: missing %s", format, arg, out, want)
				}
			}
		}
	}
}

func TestFileStringRedacts(t *testing.T) {
	f := File{Path: "password", Mode: 0o600, Contents: []byte("CONTENTS")}
	for _, format := range []string{"%v", "%+v", "%s", "%#v"} {
		for _, arg := range []any{f, &f, MountResult{Files: []File{f}}} {
			out := fmt.Sprintf(format, arg)
			if strings.Contains(out, "CONTENTS") || strings.Contains(out, "67 79 78") {
				t.Errorf("Sprintf(%q, %T) = %s: leaks the contents", format, arg, out)
			}
			if !strings.Contains(out, "password") {
				t.Errorf("Sprintf(%q, %T) = %s: missing the path", format, arg, out)
			}
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(`{"a":"b"}`, `{}`, "420")
	f.Add(``, ``, ``)
	f.Add(`null`, `{"k":"v"}`, "511")
	f.Add(`{"a":1}`, `[`, "-1")
	f.Fuzz(func(t *testing.T, attrs, secrets, perm string) {
		req, err := parseRequest(&v1alpha1.MountRequest{Attributes: attrs, Secrets: secrets, Permission: perm})
		if err != nil {
			return
		}
		if req.Attributes == nil || req.Secrets == nil || req.CurrentVersions == nil {
			t.Errorf("nil map in %v", req)
		}
		if req.Permission&^os.ModePerm != 0 {
			t.Errorf("permission %v from %q has bits beyond 0777", req.Permission, perm)
		}
	})
}
