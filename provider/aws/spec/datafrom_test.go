package spec

import (
	"testing"
)

func TestParseExtractAndFind(t *testing.T) {
	s := mustParse(t, attrsWith(`
- objectName: prod/app
  objectType: secretsmanager
  objectAlias: app
  extract: {conversionStrategy: Unicode, rewrite: [{regexp: {source: "^db_", target: ""}}]}
- objectType: secretsmanager
  objectAlias: found
  find: {path: prod/, name: {regexp: "key"}, tags: {team: a}}
- objectType: ssmparameter
  objectAlias: params
  find: {path: /prod/app, decodingStrategy: Auto}
`, map[string]string{KeyRegion: "us-east-1"}))
	if len(s.Objects) != 3 {
		t.Fatalf("objects: %+v", s.Objects)
	}
	app, found, params := s.Objects[0], s.Objects[1], s.Objects[2]
	if app.Extract == nil || app.Find != nil || app.FileName != "app" || app.Name != "prod/app" {
		t.Errorf("extract object: %+v", app)
	}
	if found.Find == nil || found.Extract != nil || found.Name != "" || found.FileName != "found" || found.Type != SecretsManager ||
		found.Find.Path != "prod/" || found.Find.Name.String() != "key" || found.Find.Tags["team"] != "a" || found.Find.Keys == nil {
		t.Errorf("find object: %+v %+v", found, found.Find)
	}
	if params.Find == nil || params.Find.Path != "/prod/app" || params.Find.Name != nil || params.Type != SSMParameter || params.Mode != 0o644 {
		t.Errorf("ssm find object: %+v %+v", params, params.Find)
	}
}

func TestParseExtractAndFindRefusals(t *testing.T) {
	tests := []struct {
		name, objects string
		extra         map[string]string
		want          []string
	}{{
		name:    "extract options",
		objects: `[{objectName: a, objectType: secretsmanager, extract: {conversionStrategy: Ascii, rewrite: [{transform: {template: "x"}}]}}]`,
		want: []string{`objects[0] ("a").extract.conversionStrategy: "Ascii" is not Default or Unicode`,
			`objects[0] ("a").extract.rewrite[0].transform: keymount rewrites keys by regular expression only`},
	}, {
		name:    "extract with jmesPath",
		objects: `[{objectName: a, objectType: secretsmanager, extract: {}, jmesPath: [{path: x, objectAlias: x}]}]`,
		want:    []string{`objects[0] ("a"): extract writes every field of the value as its own file; remove jmesPath`},
	}, {
		name:    "find naming one object",
		objects: `[{objectName: a, objectType: secretsmanager, objectVersionLabel: AWSPREVIOUS, find: {path: x}, extract: {}}]`,
		want: []string{`objects[0] ("a").objectName: find reads the current value`, `objects[0] ("a").objectVersionLabel: find reads`,
			`objects[0] ("a").extract: find reads`, `objects[0] ("a").objectAlias: is required with find`},
	}, {
		name:    "find without type",
		objects: `[{objectAlias: f, find: {path: x}}]`,
		want:    []string{`objects[0].objectType: is required with find`},
	}, {
		name:    "find matching everything",
		objects: `[{objectType: secretsmanager, objectAlias: f, find: {}}]`,
		want:    []string{`objects[0].find: matches every secret of the account; set path, name.regexp or tags`},
	}, {
		name:    "ssm find",
		objects: `[{objectType: ssmparameter, objectAlias: f, find: {path: prod, tags: {a: b}, name: {regexp: "("}}}]`,
		want: []string{`objects[0].find.path: is required for ssmparameter and starts with "/"`, `objects[0].find.tags: keymount finds parameters by path and name only`,
			`objects[0].find.name.regexp: does not compile`},
	}, {
		name: "a file inside a find directory",
		objects: `[{objectType: secretsmanager, objectAlias: f, find: {path: x}},
{objectName: f/a, objectType: secretsmanager, objectAlias: f/a}]`,
		extra: map[string]string{KeyPathTranslation: "False"},
		want:  []string{`inside "f"`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(attrsWith(tc.objects, tc.extra), 0o644)
			wantErrs(t, err, tc.want...)
		})
	}
}
