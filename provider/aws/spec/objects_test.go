package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseObjects(t *testing.T) {
	tests := []struct {
		name    string
		objects string
		extra   map[string]string
		want    []Object
	}{{
		name:    "defaults",
		objects: `[{objectName: MySecret, objectType: secretsmanager}]`,
		want:    []Object{{Name: "MySecret", Type: SecretsManager, Mode: 0o644, FileName: "MySecret"}},
	}, {
		name:    "type inferred from a Secrets Manager ARN, colons kept",
		objects: `[{objectName: "` + smARN + `"}]`,
		want:    []Object{{Name: smARN, Type: SecretsManager, Mode: 0o644, FileName: smARN}},
	}, {
		name:    "type inferred from an SSM ARN, slashes translated",
		objects: `[{objectName: "arn:aws-cn:ssm:us-east-1:123456789012:parameter/app/db"}]`,
		want: []Object{{Name: "arn:aws-cn:ssm:us-east-1:123456789012:parameter/app/db", Type: SSMParameter, Mode: 0o644,
			FileName: "arn:aws-cn:ssm:us-east-1:123456789012:parameter_app_db"}},
	}, {
		name:    "ARN with a matching objectType",
		objects: `[{objectName: "` + smARN + `", objectType: secretsmanager, objectAlias: s}]`,
		want:    []Object{{Name: smARN, Type: SecretsManager, Alias: "s", Mode: 0o644, FileName: "s"}},
	}, {
		name:    "default path translation",
		objects: `[{objectName: /app/db/pass, objectType: ssmparameter}]`,
		want:    []Object{{Name: "/app/db/pass", Type: SSMParameter, Mode: 0o644, FileName: "_app_db_pass"}},
	}, {
		name:    "custom path translation",
		objects: `[{objectName: app/db/pass, objectType: ssmparameter}]`,
		extra:   map[string]string{KeyPathTranslation: "-"},
		want:    []Object{{Name: "app/db/pass", Type: SSMParameter, Mode: 0o644, FileName: "app-db-pass"}},
	}, {
		name:    "path translation off keeps directories and drops leading slashes",
		objects: `[{objectName: /app/db/pass, objectType: ssmparameter}]`,
		extra:   map[string]string{KeyPathTranslation: "False"},
		want:    []Object{{Name: "/app/db/pass", Type: SSMParameter, Mode: 0o644, FileName: "app/db/pass"}},
	}, {
		name:    "path translation off, any case",
		objects: `[{objectName: a/b, objectType: ssmparameter}]`,
		extra:   map[string]string{KeyPathTranslation: "false"},
		want:    []Object{{Name: "a/b", Type: SSMParameter, Mode: 0o644, FileName: "a/b"}},
	}, {
		name:    "alias is translated too",
		objects: `[{objectName: x, objectType: secretsmanager, objectAlias: dir/file}]`,
		want:    []Object{{Name: "x", Type: SecretsManager, Alias: "dir/file", Mode: 0o644, FileName: "dir_file"}},
	}, {
		name: "versions, labels and permissions",
		objects: `
- objectName: sm
  objectType: secretsmanager
  objectVersion: EXAMPLE1-90ab-cdef-fedc-ba987EXAMPLE
  objectVersionLabel: AWSCURRENT
  filePermission: "0600"
- objectName: p
  objectType: ssmparameter
  objectVersion: "12"
  filePermission: "400"
- objectName: q
  objectType: ssmparameter
  objectVersionLabel: prod`,
		want: []Object{
			{Name: "sm", Type: SecretsManager, Version: "EXAMPLE1-90ab-cdef-fedc-ba987EXAMPLE", VersionLabel: "AWSCURRENT", Mode: 0o600, FileName: "sm"},
			{Name: "p", Type: SSMParameter, Version: "12", Mode: 0o400, FileName: "p"},
			{Name: "q", Type: SSMParameter, VersionLabel: "prod", Mode: 0o644, FileName: "q"},
		},
	}, {
		name: "jmesPath entries",
		objects: `
- objectName: MySecret
  objectType: secretsmanager
  filePermission: "0640"
  jmesPath:
    - path: username
      objectAlias: user
    - path: "hosts[0].name"
      objectAlias: conf/host
      filePermission: "0600"`,
		want: []Object{{Name: "MySecret", Type: SecretsManager, Mode: 0o640, FileName: "MySecret", JMESPaths: []JMESPath{
			{Path: "username", Alias: "user", Mode: 0o640, FileName: "user"},
			{Path: "hosts[0].name", Alias: "conf/host", Mode: 0o600, FileName: "conf_host"},
		}}},
	}, {
		name: "failover object takes the primary version by default",
		objects: `
- objectName: "` + smARN + `"
  objectAlias: db
  objectVersionLabel: AWSCURRENT
  failoverObject:
    objectName: "arn:aws:secretsmanager:us-east-2:123456789012:secret:Other-a1b2c3"`,
		extra: map[string]string{KeyRegion: "us-east-1", KeyFailoverRegion: "us-east-2"},
		want: []Object{{Name: smARN, Type: SecretsManager, Alias: "db", VersionLabel: "AWSCURRENT", Mode: 0o644, FileName: "db",
			Failover: &Failover{Name: "arn:aws:secretsmanager:us-east-2:123456789012:secret:Other-a1b2c3", VersionLabel: "AWSCURRENT"}}},
	}, {
		name: "same object twice under different aliases",
		objects: `
- {objectName: s, objectType: secretsmanager, objectAlias: current}
- {objectName: s, objectType: secretsmanager, objectAlias: previous, objectVersionLabel: AWSPREVIOUS}`,
		want: []Object{
			{Name: "s", Type: SecretsManager, Alias: "current", Mode: 0o644, FileName: "current"},
			{Name: "s", Type: SecretsManager, Alias: "previous", VersionLabel: "AWSPREVIOUS", Mode: 0o644, FileName: "previous"},
		},
	}, {
		// The existing provider decodes with sigs.k8s.io/yaml into
		// JSON-tagged fields: keys match in any case, a repeated key keeps
		// its last value. Unknown keys are refused unless the class lists
		// them in keymount.io/ignore-parameters (in any case, as fields).
		name:  "keys in any case, listed unknown keys ignored",
		extra: map[string]string{KeyIgnoreParameters: "objecttemplate, Comment"},
		objects: `
- objectname: app/db
  OBJECTTYPE: secretsmanager
  ObjectAlias: db
  objectTemplate: "{{ .password }}"
  JmesPath:
    - PATH: password
      objectalias: pw
      FilePermission: "0400"
      comment: ignored
- ObjectName: first
  objectType: ssmparameter
  objectName: last
  objectVERSIONlabel: prod`,
		want: []Object{
			{Name: "app/db", Type: SecretsManager, Alias: "db", Mode: 0o644, FileName: "db", JMESPaths: []JMESPath{
				{Path: "password", Alias: "pw", Mode: 0o400, FileName: "pw"},
			}},
			{Name: "last", Type: SSMParameter, VersionLabel: "prod", Mode: 0o644, FileName: "last"},
		},
	}, {
		name:    "failover keys in any case",
		objects: `[{objectName: a, objectType: ssmparameter, objectAlias: a, FailoverObject: {OBJECTNAME: b, objectversionlabel: l}}]`,
		extra:   map[string]string{KeyFailoverRegion: "us-west-2"},
		want: []Object{{Name: "a", Type: SSMParameter, Alias: "a", Mode: 0o644, FileName: "a",
			Failover: &Failover{Name: "b", VersionLabel: "l"}}},
	}, {
		// sigs.k8s.io/yaml writes a YAML scalar given for a string field
		// as its text, YAML 1.1 booleans included.
		name:    "numbers and booleans as text",
		objects: `[{objectName: 42, objectType: ssmparameter, objectVersion: 3}, {objectName: y, objectType: ssmparameter}]`,
		want: []Object{
			{Name: "42", Type: SSMParameter, Version: "3", Mode: 0o644, FileName: "42"},
			{Name: "true", Type: SSMParameter, Mode: 0o644, FileName: "true"},
		},
	}, {
		name: "jmesPath aliases follow path translation",
		objects: `
- objectName: app/db
  objectType: secretsmanager
  jmesPath:
    - {path: username, objectAlias: db/user}
    - {path: password, objectAlias: /db/password}`,
		extra: map[string]string{KeyPathTranslation: "-"},
		want: []Object{{Name: "app/db", Type: SecretsManager, Mode: 0o644, FileName: "app-db", JMESPaths: []JMESPath{
			{Path: "username", Alias: "db/user", Mode: 0o644, FileName: "db-user"},
			{Path: "password", Alias: "/db/password", Mode: 0o644, FileName: "-db-password"},
		}}},
	}, {
		name: "jmesPath aliases with path translation off",
		objects: `
- objectName: app/db
  objectType: secretsmanager
  jmesPath:
    - {path: username, objectAlias: /db/user}`,
		extra: map[string]string{KeyPathTranslation: "False"},
		want: []Object{{Name: "app/db", Type: SecretsManager, Mode: 0o644, FileName: "app/db", JMESPaths: []JMESPath{
			{Path: "username", Alias: "/db/user", Mode: 0o644, FileName: "db/user"},
		}}},
	}, {
		name:    "null values are unset",
		objects: `[{objectName: s, objectType: secretsmanager, objectAlias: null, jmesPath: null, failoverObject: null}]`,
		want:    []Object{{Name: "s", Type: SecretsManager, Mode: 0o644, FileName: "s"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, attrsWith(tt.objects, tt.extra))
			if diff := cmp.Diff(tt.want, s.Objects); diff != "" {
				t.Errorf("Objects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseObjectsErrors(t *testing.T) {
	tests := []struct {
		name    string
		objects string
		extra   map[string]string
		want    []string
	}{
		{"missing", "", nil, []string{"objects: is not set"}},
		{"empty list", "[]", nil, []string{"objects: the list is empty"}},
		{"not a list", "objectName: x", nil, []string{"objects: is a YAML mapping, not a list of objects"}},
		{"not YAML", "[{objectName: x", nil, []string{"objects: is not a YAML list of objects"}},
		{"entry not a mapping", "[x]", nil, []string{"objects: an entry is a YAML string, not a mapping"}},
		{"name is a list", "[{objectName: [x], objectType: ssmparameter}]", nil, []string{"objects: objectName of an entry is a YAML list, not a string"}},
		{"failoverObject is a string", "[{objectName: x, objectType: ssmparameter, failoverObject: other}]", nil,
			[]string{"objects: failoverObject of an entry is a YAML string, not a mapping"}},
		{"no name", "[{objectType: ssmparameter}]", nil, []string{"objects[0].objectName: is required"}},
		{"empty name", `[{objectName: "", objectType: ssmparameter}]`, nil, []string{"objects[0].objectName: is required"}},
		{"no type", "[{objectName: x}]", nil, []string{`objects[0] ("x").objectType: is required when objectName is not an ARN`}},
		{"bad type", `[{objectName: x}, {objectName: x}, {objectName: db/pass, objectType: secretmanager}]`, nil,
			[]string{`objects[2] ("db/pass").objectType: "secretmanager" is not secretsmanager or ssmparameter`}},
		{"ssm is not an objectType", `[{objectName: x, objectType: ssm}]`, nil, []string{`"ssm" is not secretsmanager or ssmparameter`}},
		{"ARN of the other type", `[{objectName: "` + smARN + `", objectType: ssmparameter}]`, nil,
			[]string{`.objectType: "ssmparameter" does not match the ARN's service "secretsmanager"`}},
		{"ARN of another service", `[{objectName: "arn:aws:s3:us-east-1:1:bucket"}]`, nil, []string{`the ARN's service "s3" is not secretsmanager or ssm`}},
		{"malformed ARN", `[{objectName: "arn:aws:secretsmanager"}]`, nil, []string{".objectName: is not a valid ARN"}},
		{"ARN in another region", `[{objectName: "` + smARN + `"}]`, map[string]string{KeyRegion: "eu-west-1"},
			[]string{`the ARN is in region "us-east-1" but region is "eu-west-1"`}},
		{"unquoted file mode", `[{objectName: x, objectType: ssmparameter, filePermission: 0600}]`, nil,
			[]string{`.filePermission: is a number; write the mode as a quoted octal string like "0600"`}},
		{"bad file mode", `[{objectName: x, objectType: ssmparameter, filePermission: "0800"}]`, nil, []string{`"0800" is not an octal file mode`}},
		{"file mode too wide", `[{objectName: x, objectType: ssmparameter, filePermission: "4755"}]`, nil, []string{`"4755" is not an octal file mode`}},
		{"SSM version not a number", `[{objectName: x, objectType: ssmparameter, objectVersion: latest}]`, nil, []string{`"latest" is not an SSM parameter version`}},
		{"SSM version zero", `[{objectName: x, objectType: ssmparameter, objectVersion: "0"}]`, nil, []string{`"0" is not an SSM parameter version`}},
		{"SSM version and label", `[{objectName: x, objectType: ssmparameter, objectVersion: "1", objectVersionLabel: l}]`, nil,
			[]string{"takes objectVersion or objectVersionLabel, not both"}},
		{"Secrets Manager version not an ID", `[{objectName: x, objectType: secretsmanager, objectVersion: AWSCURRENT}]`, nil,
			[]string{`"AWSCURRENT" is not a Secrets Manager version ID`}},
		{"dot-dot name, translation off", `[{objectName: a/../../etc, objectType: ssmparameter}]`, map[string]string{KeyPathTranslation: "False"},
			[]string{`objects[0] ("a/../../etc"): cannot be written as file`}},
		{"dot-dot alias", `[{objectName: x, objectType: ssmparameter, objectAlias: ".."}]`, nil, []string{"cannot be written as file"}},
		{"not clean, translation off", `[{objectName: a//b, objectType: ssmparameter}]`, map[string]string{KeyPathTranslation: "False"}, []string{"not clean"}},
		{"duplicate file names", `[{objectName: a/b, objectType: ssmparameter}, {objectName: x, objectType: ssmparameter, objectAlias: a_b}]`, nil,
			[]string{`objects[1] ("x"): writes file "a_b", as objects[0] ("a/b") does`}},
		{"duplicate names", `[{objectName: x, objectType: ssmparameter}, {objectName: x, objectType: ssmparameter, objectVersion: "2"}]`, nil,
			[]string{`writes file "x", as objects[0] ("x") does`}},
		{"jmesPath alias duplicates an object", `[{objectName: x, objectType: secretsmanager, jmesPath: [{path: a, objectAlias: z}]}, {objectName: z, objectType: ssmparameter}]`, nil,
			[]string{`objects[1] ("z"): writes file "z", as objects[0] ("x").jmesPath[0] does`}},
		{"file inside another file", `[{objectName: a, objectType: ssmparameter}, {objectName: a/b, objectType: ssmparameter}]`, map[string]string{KeyPathTranslation: "False"},
			[]string{`writes file "a/b" inside "a"`}},
		{"jmesPath not a list", `[{objectName: x, objectType: secretsmanager, jmesPath: {path: a}}]`, nil, []string{"objects: jmesPath of an entry is a YAML mapping, not a list"}},
		{"unquoted jmesPath file mode", `[{objectName: x, objectType: secretsmanager, jmesPath: [{path: a, objectAlias: b, filePermission: 0400}]}]`, nil,
			[]string{`objects[0] ("x").jmesPath[0].filePermission: is a number; write the mode as a quoted octal string`}},
		{"file mode a boolean", `[{objectName: x, objectType: ssmparameter, filePermission: yes}]`, nil, []string{`.filePermission: is a boolean`}},
		{"jmesPath entry incomplete", `[{objectName: x, objectType: secretsmanager, jmesPath: [{filePermission: "0600", extra: 1}]}]`, nil,
			[]string{".jmesPath[0].path: is required", ".jmesPath[0].objectAlias: is required"}},
		{"jmesPath does not compile", `[{objectName: x, objectType: secretsmanager, jmesPath: [{path: "a[", objectAlias: y}]}]`, nil,
			[]string{`.jmesPath[0].path: "a[" does not compile`}},
		{"failover without failoverRegion", `[{objectName: x, objectType: secretsmanager, objectAlias: y, failoverObject: {objectName: z}}]`, nil,
			[]string{".failoverObject: needs the class's failoverRegion"}},
		{"failover without alias", `[{objectName: x, objectType: secretsmanager, failoverObject: {objectName: z}}]`, map[string]string{KeyFailoverRegion: "us-west-2"},
			[]string{`objects[0] ("x").objectAlias: is required with failoverObject`}},
		{"failover without name", `[{objectName: x, objectType: secretsmanager, objectAlias: y, failoverObject: {objectVersionLabel: l, bad: 1}}]`,
			map[string]string{KeyFailoverRegion: "us-west-2"}, []string{".failoverObject.objectName: is required"}},
		{"failover version differs", `[{objectName: x, objectType: ssmparameter, objectAlias: y, objectVersion: "1", failoverObject: {objectName: z, objectVersion: "2"}}]`,
			map[string]string{KeyFailoverRegion: "us-west-2"}, []string{`.failoverObject.objectVersion: "2" differs from objectVersion "1"`}},
		{"failover ARN of the other type", `[{objectName: x, objectType: ssmparameter, objectAlias: y, failoverObject: {objectName: "` + smARN + `"}}]`,
			map[string]string{KeyFailoverRegion: "us-east-1"}, []string{`.failoverObject.objectName: the ARN's service "secretsmanager" does not match`}},
		{"failover ARN in another region", `[{objectName: x, objectType: secretsmanager, objectAlias: y, failoverObject: {objectName: "` + smARN + `"}}]`,
			map[string]string{KeyRegion: "us-west-1", KeyFailoverRegion: "us-west-2"}, []string{`failoverObject.objectName: the ARN is in region "us-east-1" but failoverRegion is "us-west-2"`}},
		{"every problem reported", `[{objectName: a}, {objectName: b, objectType: x}, {objectType: ssmparameter}]`, nil,
			[]string{`objects[0] ("a").objectType: is required`, `objects[1] ("b").objectType: "x"`, "objects[2].objectName: is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(attrsWith(tt.objects, tt.extra), 0o644)
			if s != nil {
				t.Errorf("Parse returned a Spec with an error")
			}
			wantErrs(t, err, tt.want...)
		})
	}
}
