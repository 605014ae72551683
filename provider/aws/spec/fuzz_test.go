package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/keymount/keymount/provider/server"
)

// tokenMarker stands for a token value in fuzzed tokens JSON.
const tokenMarker = "eyJtYXJrZXIiOiJ0b2tlbiJ9.ZnV6eg"

func FuzzParseObjects(f *testing.F) {
	seeds := []string{
		oneObject,
		`[{objectName: "` + smARN + `", jmesPath: [{path: a.b, objectAlias: x/y}]}]`,
		`[{objectName: a/../b, objectType: ssmparameter, objectAlias: "..", filePermission: "0600"}]`,
		`[{objectName: x, objectType: ssmparameter, objectAlias: y, failoverObject: {objectName: z, objectVersion: "1"}}]`,
		"- objectName: /a//b/\n  objectType: ssmparameter\n- objectName: a\n  objectType: ssmparameter",
		`[{objectName: "arn:aws:ssm:us-east-1:1:parameter/x"}, {}]`,
		`{objectName: 1}`,
	}
	for _, s := range seeds {
		f.Add(s, `{"sts.amazonaws.com": {"token": "TOKEN"}}`, "")
		f.Add(s, `{"a": {"token": "TOKEN"`, "False")
		f.Add(s, `TOKEN`, "/")
	}
	f.Fuzz(func(t *testing.T, objects, tokens, translation string) {
		attrs := map[string]string{
			KeyObjects:         objects,
			KeyPathTranslation: translation,
			KeyFailoverRegion:  "us-west-2",
			KeyTokens:          strings.ReplaceAll(tokens, "TOKEN", tokenMarker),
		}
		markerElsewhere := strings.Contains(objects, tokenMarker) || strings.Contains(translation, tokenMarker)
		s, err := Parse(attrs, 0o644)
		if err != nil {
			if !strings.Contains(err.Error(), ErrInvalid.Error()) {
				t.Fatalf("error does not start from ErrInvalid: %v", err)
			}
			if !markerElsewhere && strings.Contains(err.Error(), tokenMarker) {
				t.Fatalf("error shows a token: %v", err)
			}
			return
		}
		if !markerElsewhere && strings.Contains(s.String(), tokenMarker) {
			t.Fatalf("String shows a token: %s", s)
		}
		seen := map[string]bool{}
		check := func(name string) {
			if err := server.ValidatePath(name); err != nil {
				t.Fatalf("accepted file name: %v", err)
			}
			if seen[name] {
				t.Fatalf("accepted file %q twice", name)
			}
			seen[name] = true
		}
		for _, o := range s.Objects {
			if o.Type != SecretsManager && o.Type != SSMParameter {
				t.Fatalf("accepted object %q of type %q", o.Name, o.Type)
			}
			check(o.FileName)
			for _, jp := range o.JMESPaths {
				check(jp.FileName)
			}
		}
	})
}

func FuzzPathTranslation(f *testing.F) {
	for _, s := range []string{"a/b", "/a/b/", "../x", "a//b", "arn:aws:ssm:us-east-1:1:parameter/a/b"} {
		for _, tr := range []string{"", "_", "False", "-", ".", "/", `\`, "ab"} {
			f.Add(s, tr)
		}
	}
	f.Fuzz(func(t *testing.T, name, translation string) {
		quoted, err := json.Marshal(name) // a JSON string is a YAML scalar
		if err != nil {
			t.Fatal(err)
		}
		objects := `[{objectName: ` + string(quoted) + `, objectType: ssmparameter}]`
		s, err := Parse(map[string]string{KeyObjects: objects, KeyPathTranslation: translation}, 0o600)
		if err != nil {
			return
		}
		name = s.Objects[0].Name // as YAML decoded it
		got := s.Objects[0].FileName
		if err := server.ValidatePath(got); err != nil {
			t.Fatalf("accepted file name: %v", err)
		}
		switch {
		case s.PathTranslation == "":
			if got != strings.TrimLeft(name, "/") {
				t.Fatalf("translation off: file %q for name %q", got, name)
			}
		case s.PathTranslation != "/":
			if strings.Contains(got, "/") || len(got) != len(name) {
				t.Fatalf("translation %q: file %q for name %q", s.PathTranslation, got, name)
			}
		}
	})
}
