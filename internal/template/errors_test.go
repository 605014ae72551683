package template

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// TestErrorsShowNoDerivedValue: whatever a template does to a secret before
// it fails (upper-case it, quote it, decode it, iterate it, index by it, fail
// with it), the error shows neither the value nor what was made of it, and
// still names the template, the line and column, and the function.
func TestErrorsShowNoDerivedValue(t *testing.T) {
	const secret = "hunter2-Sekret"
	objs := map[string][]byte{"password": []byte(secret), "host": []byte("db.internal")}
	derived := []string{secret, strings.ToUpper(secret), strings.ToLower(secret), "HUNTER2", "hunter2",
		base64.StdEncoding.EncodeToString([]byte(secret)), base64.StdEncoding.EncodeToString([]byte(strings.ToUpper(secret)))}
	for _, tc := range []struct{ text, want string }{
		{`{{ .password | upper | fail }}`, "error calling fail"},
		{"x\n{{ fail (printf \"bad password %s\" (upper .password)) }}", "line 2, column 3"},
		{`{{ range (upper .password) }}{{ end }}`, "line 1"},
		{`{{ range $i, $c := (upper .password | len) }}{{ end }}`, "line 1"},
		{`{{ index . (upper .password) }}`, "error calling index"},
		{`{{ index (dict (upper .password) 1) "x" }}`, "error calling index"},
		{`{{ urlParse (print "http://[" (upper .password)) }}`, "error calling urlParse"},
		{`{{ mustRegexMatch (print "(" (upper .password)) "x" }}`, "error calling mustRegexMatch"},
		{`{{ regexReplaceAll (print "(" (upper .password)) "x" "y" }}`, "error calling regexReplaceAll"},
		{`{{ fromJson (upper .password) }}`, "error calling fromJson"},
		{`{{ fromYaml (print "a: [" (upper .password)) }}`, "error calling fromYaml"},
		{`{{ mustFromJson (upper .password) }}`, "error calling mustFromJson"},
		{`{{ semver (upper .password) }}`, "error calling semver"},
		{`{{ b64dec (upper .password) }}`, "error calling b64dec"},
		{`{{ b32dec (upper .password) }}`, "error calling b32dec"},
		{`{{ filterPEM (upper .password) "x" }}`, "error calling filterPEM"},
		{`{{ pkcs12key (upper .password) }}`, "error calling pkcs12key"},
		{`{{ jwkPublicKeyPem (upper .password) }}`, "error calling jwkPublicKeyPem"},
		{`{{ mustToDate "2006" (upper .password) }}`, "mustToDate"},
		{`{{ slice (upper .password) 1 99 }}`, "line 1"},
		{`{{ eq (upper .password) 1 }}`, "error calling eq"},
		{`{{ index (list 1) (len (upper .password)) }}`, "error calling index"},
		{`{{ mustFirst (upper .password) }}`, "error calling mustFirst"},
		{`{{ printf (upper .password | print "%*d") 1 }}`, "error calling printf"},
		{`{{ repeat 1000000 (upper .password) }}`, "output too large"},
	} {
		_, err := Render("keymount.io/template.dsn", tc.text, objs)
		if err == nil {
			if strings.Contains(tc.want, "mustToDate") { // not in the set: a parse error, which shows the template only
				continue
			}
			t.Errorf("Render(%s): nil error", tc.text)
			continue
		}
		msg := err.Error()
		for _, v := range derived {
			if strings.Contains(msg, v) {
				t.Errorf("Render(%s) error %q shows %q, derived from the secret", tc.text, msg, v)
			}
		}
		if !strings.HasPrefix(msg, `template "keymount.io/template.dsn": `) || !strings.Contains(msg, tc.want) {
			t.Errorf("Render(%s) error %q: want it to name the template and %q", tc.text, msg, tc.want)
		}
		for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
			for _, v := range derived {
				if strings.Contains(e.Error(), v) {
					t.Errorf("Render(%s): the error unwraps to %q, which shows %q", tc.text, e, v)
				}
			}
		}
	}
}

// TestErrorsShowTheTemplatesOwnText: a message, key or type the template's
// text spells is shown: {{ fail "..." }}, a mistyped key, a bad argument.
func TestErrorsShowTheTemplatesOwnText(t *testing.T) {
	objs := map[string][]byte{"password": []byte("hunter2-Sekret")}
	for _, tc := range []struct{ text, want string }{
		{`{{ if eq (len .) 1 }}{{ fail "the store has no host: add one" }}{{ end }}`,
			`line 1, column 24, at <fail "the store has no host: add one">: error calling fail: "the store has no host: add one"`},
		{`{{ index . "pasword" }}`, `error calling index: map has no entry for key "pasword"`},
		{`{{ .pasword }}`, `at <.pasword>: map has no entry for key "pasword"`},
		{`{{ filterPEM "CERT" .password }}`, `error calling filterPEM: no "CERT" block`},
		{`{{ printf "%2000d" 1 }}`, `error calling printf: width or precision over 1024`},
		{`{{ index (list 1) 3 }}`, `index <hidden> out of range [0, 1)`},
		{`{{ .password.x }}`, `can't evaluate field x in type string`},
		{`{{ b64dec "a" }}`, `error calling b64dec: illegal base64 data at input byte 0`},
		{`{{ fromJson "{" }}`, `error calling fromJson: invalid JSON at byte offset 1`},
		{`{{ range until 200000 }}{{ end }}`, `template limit exceeded`},
		{"{{ define \"dsn\" }}\n{{ .pasword }}{{ end }}{{ template \"dsn\" . }}", `template "t": line 2, column 3, at <.pasword>: map has no entry for key "pasword"`},
	} {
		_, err := Render("t", tc.text, objs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Render(%s) error %v, want one holding %q", tc.text, err, tc.want)
		}
	}
	if _, err := Render("t", `{{ range until 200000 }}{{ end }}`, objs); !errors.Is(err, ErrLimit) {
		t.Errorf("a limit: %v, want errors.Is ErrLimit", err)
	}
}
