package spec

import (
	"cmp"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/keymount/keymount/internal/classparams"
)

const roleARN = "arn:aws:iam::210987654321:role/secrets-reader"

// TestUnknownKeys: every key and field keymount does not read is refused,
// naming it, unless the class lists it in keymount.io/ignore-parameters.
func TestUnknownKeys(t *testing.T) {
	newerKeys["futureParameter"] = "ASCP 9.9 knows it"
	t.Cleanup(func() { delete(newerKeys, "futureParameter") })
	for _, tc := range []struct {
		name    string
		objects string
		extra   map[string]string
		// want are substrings of the error; none means Parse succeeds.
		want []string
	}{{
		name: "what kubelet, the drivers and keymount-controller add",
		extra: map[string]string{
			KeyClass: "app", KeyPodName: "web", KeyPodNamespace: "shop", KeyPodUID: "0b5e7a52-1c1b-4c7e-9a43-8d0c1f2e3a4b", KeyServiceAccount: "app",
			"csi.storage.k8s.io/ephemeral": "true", KeyTokens: `{}`, "csi.storage.k8s.io/some.future.kubelet.key": "x",
		},
	}, {
		name:  "every parameter of ASCP 3.2",
		extra: map[string]string{KeyRegion: "us-east-1", KeyFailoverRegion: "us-west-2", KeyPathTranslation: "-", KeyUsePodIdentity: "true", KeyPreferredAddressType: "ipv4", KeyAssumeRoleARN: roleARN},
	}, {
		name:  "an unknown parameter",
		extra: map[string]string{"roleArn": roleARN},
		want:  []string{"roleArn: not known to keymount's AWS provider, nor to any upstream ASCP release it knows of", KeyIgnoreParameters},
	}, {
		name:  "a parameter in the wrong case",
		extra: map[string]string{"assumeRoleARN": roleARN},
		want:  []string{"assumeRoleARN: not known to keymount's AWS provider; parameter keys are case-sensitive: did you mean assumeRoleArn?"},
	}, {
		name:  "a parameter of a newer upstream release",
		extra: map[string]string{"futureParameter": "x"},
		want:  []string{"futureParameter: not known to keymount's AWS provider (ASCP 9.9 knows it)", KeyIgnoreParameters},
	}, {
		name:  "every unknown parameter, sorted, an odd one quoted",
		extra: map[string]string{"zeta": "1", "alpha": "2", "with space": "3"},
		want:  []string{"alpha: not known", "zeta: not known", `"with space": not known`},
	}, {
		name:  "listed parameters are ignored",
		extra: map[string]string{"futureParameter": "x", "other": "y", KeyIgnoreParameters: " futureParameter ,other,"},
	}, {
		name:  "the list is case-sensitive for parameters",
		extra: map[string]string{"futureparameter": "x", KeyIgnoreParameters: "futureParameter"},
		want:  []string{"futureparameter: not known"},
	}, {
		name:  "listing a key keymount reads changes nothing: it is still read",
		extra: map[string]string{KeyAssumeRoleARN: "reader", KeyIgnoreParameters: "assumeRoleArn,region"},
		want:  []string{KeyAssumeRoleARN + `: "reader" is not an IAM role ARN`},
	}, {
		name:    "objectTemplate, from upstream's README",
		objects: "- objectName: app/db\n  objectType: secretsmanager\n  objectTemplate: |\n    {{ range $k, $v := . }}{{ $k }}={{ $v }}{{ end }}\n",
		want:    []string{`objects[0] ("app/db").objectTemplate: not known to keymount's AWS provider (upstream ASCP's README describes it`},
	}, {
		name:    "a listed field is ignored, in any case",
		objects: "- objectName: app/db\n  objectType: secretsmanager\n  OBJECTTEMPLATE: x\n",
		extra:   map[string]string{KeyIgnoreParameters: "objectTemplate"},
	}, {
		name: "unknown fields at every level",
		objects: `
- objectName: a
  objectType: secretsmanager
  objectAlias: a
  jmesPath: [{path: x, objectAlias: x, comment: c}]
  failoverObject: {objectName: b, objectAlias: b}
- objectType: secretsmanager
  objectAlias: found
  find: {path: p/, name: {regex: x}, rewrite: [{regexp: {sorce: a, target: b}}]}
`,
		extra: map[string]string{KeyFailoverRegion: "us-west-2"},
		want: []string{
			`objects[0] ("a").jmesPath[0].comment: not known`,
			`objects[0] ("a").failoverObject.objectAlias: not known`,
			"objects[1].find.name.regex: not known", "(fields here: regexp)",
			"objects[1].find.rewrite[0].regexp.sorce: not known",
		},
	}, {
		name:    "keymount's extract and find, ESO's fields, any case",
		objects: "- {objectName: a, objectType: secretsmanager, objectAlias: a, Extract: {ConversionStrategy: Default, rewrite: [{regexp: {source: a, target: b}}]}}\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objects := cmp.Or(tc.objects, oneObject)
			s, err := Parse(attrsWith(objects, tc.extra), 0o644)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if want := tc.extra[KeyAssumeRoleARN]; s.AssumeRoleARN != want {
					t.Errorf("AssumeRoleARN = %q, want %q", s.AssumeRoleARN, want)
				}
				return
			}
			wantErrs(t, err, tc.want...)
		})
	}
}

func TestAssumeRoleARN(t *testing.T) {
	for _, v := range []string{
		roleARN,
		"arn:aws-cn:iam::123456789012:role/path/to/role",
		"arn:aws-us-gov:iam::123456789012:role/a+=,.@_-b",
	} {
		if s := mustParse(t, attrsWith(oneObject, map[string]string{KeyAssumeRoleARN: v})); s.AssumeRoleARN != v {
			t.Errorf("AssumeRoleARN = %q, want %q", s.AssumeRoleARN, v)
		}
	}
	for _, v := range []string{
		"secrets-reader",
		"arn:aws:iam::12345:role/short-account",
		"arn:aws:iam:us-east-1:123456789012:role/regional",
		"arn:aws:sts::123456789012:assumed-role/r/s",
		"arn:aws:iam::123456789012:user/alice",
		"arn:aws:iam::123456789012:role/",
		"arn:aws:iam::123456789012:role/with space",
		"arn::iam::123456789012:role/no-partition",
		"arn:aws:iam::123456789012:role/" + strings.Repeat("r", maxRoleARN),
	} {
		_, err := Parse(attrsWith(oneObject, map[string]string{KeyAssumeRoleARN: v}), 0o644)
		wantErrs(t, err, KeyAssumeRoleARN+": ", "is not an IAM role ARN")
	}
}

// FuzzUnknownKeys: a parameter key or object field keymount does not know
// is refused, naming it, and accepted once the class lists it.
func FuzzUnknownKeys(f *testing.F) {
	for _, k := range []string{"assumeRoleArn", "roleArn", "objectTemplate", "csi.storage.k8s.io/x", "Region", "a,b", " x ", "secretProviderClass", "objectname", "é"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if k == "" || !utf8.ValidString(k) || strings.Contains(k, ",") || strings.TrimSpace(k) != k {
			return
		}
		t.Run("parameter", func(t *testing.T) { fuzzParameter(t, k) })
		t.Run("field", func(t *testing.T) { fuzzField(t, k) })
	})
}

func fuzzParameter(t *testing.T, k string) {
	if knownKeys[k] || classparams.DriverAdded(k) {
		return
	}
	_, err := Parse(attrsWith(oneObject, map[string]string{k: "v"}), 0o644)
	wantErrs(t, err, keyName(k)+": not known to keymount's AWS provider")
	if _, err := Parse(attrsWith(oneObject, map[string]string{k: "v", KeyIgnoreParameters: k}), 0o644); err != nil {
		t.Fatalf("listed key %q: %v", k, err)
	}
}

func fuzzField(t *testing.T, k string) {
	if isKnownField(k) || knownKeys[k] || classparams.DriverAdded(k) {
		return
	}
	b, err := json.Marshal([]map[string]string{{"objectName": "a", "objectType": "ssmparameter", k: "v"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(attrsWith(string(b), nil), 0o644)
	if err != nil && strings.Contains(err.Error(), "is not a YAML") {
		return // a key YAML cannot hold
	}
	wantErrs(t, err, `objects[0] ("a").`+keyName(k)+": not known to keymount's AWS provider")
	if _, err := Parse(attrsWith(string(b), map[string]string{KeyIgnoreParameters: k}), 0o644); err != nil {
		t.Fatalf("listed field %q: %v", k, err)
	}
}

// knownFieldNames are the fields of every entry type of `objects`.
var knownFieldNames = func() []string {
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
			return
		}
		for name, ft := range jsonFields(t) {
			seen[name] = true
			walk(ft)
		}
	}
	walk(reflect.TypeFor[objectEntry]())
	return slices.Sorted(maps.Keys(seen))
}()

// isKnownField reports whether k names a field of some entry of `objects`.
func isKnownField(k string) bool {
	return slices.ContainsFunc(knownFieldNames, func(n string) bool { return strings.EqualFold(n, k) })
}
