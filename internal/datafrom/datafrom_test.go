package datafrom

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func compile(t *testing.T, o Options) *Compiled {
	t.Helper()
	c, err := o.Compile("objects[0].extract")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func re(source, target string) Rewrite {
	return Rewrite{Regexp: &RegexpRewrite{Source: source, Target: target}}
}

func strs(m map[string][]byte) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func TestExtract(t *testing.T) {
	value := []byte(`{"username":"app","password":"p\"w","port":5432,"tls":true,"none":null,"nested":{"a": [1, 2]}}`)
	got, err := compile(t, Options{}).Extract(value)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"username": "app", "password": `p"w`, "port": "5432", "tls": "true", "none": "null",
		"nested": `{"a": [1, 2]}`, // as written
	}
	if d := cmp.Diff(want, strs(got)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestExtractRefusesWhatIsNotAnObject(t *testing.T) {
	c := compile(t, Options{})
	for _, v := range []string{`"text"`, `[1,2]`, `42`, `null`, `not json`, `{"a":1} {"b":2}`, ``} {
		if _, err := c.Extract([]byte(v)); !errors.Is(err, ErrNotObject) {
			t.Errorf("Extract(%q): %v, want ErrNotObject", v, err)
		}
	}
}

func TestExtractKeys(t *testing.T) {
	value := []byte(`{"db/user":"u","db/pass":"p","é":"x"}`)
	// Without rewrites, Default turns what a key cannot hold into "_", for
	// extracted keys as for found names (as External Secrets does).
	got, err := compile(t, Options{}).Extract(value)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"db_user": "u", "db_pass": "p", "_": "x"}, strs(got)); d != "" {
		t.Errorf("Default (-want +got):\n%s", d)
	}
	got, err = compile(t, Options{ConversionStrategy: ConvertUnicode}).Extract(value)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"db_U002f_user": "u", "db_U002f_pass": "p", "_U00e9_": "x"}, strs(got)); d != "" {
		t.Errorf("Unicode (-want +got):\n%s", d)
	}
	got, err = compile(t, Options{Rewrite: []Rewrite{re(`^db/(.*)$`, "DB_$1"), re("é", "e")}}).Extract(value)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"DB_user": "u", "DB_pass": "p", "e": "x"}, strs(got)); d != "" {
		t.Errorf("rewrites (-want +got):\n%s", d)
	}
}

func TestFound(t *testing.T) {
	byName := map[string][]byte{"/path/key1": []byte("1"), "key2/path": []byte("2"), "path/to/keyring": []byte("3")}
	got, err := compile(t, Options{}).Found(byName)
	if err != nil {
		t.Fatal(err)
	}
	// ESO's documented example of dataFrom.find.
	if d := cmp.Diff(map[string]string{"_path_key1": "1", "key2_path": "2", "path_to_keyring": "3"}, strs(got)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// With a rewrite, names are rewritten and not converted.
	got, err = compile(t, Options{Rewrite: []Rewrite{re(`^.*/`, "")}}).Found(byName)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"key1": "1", "path": "2", "keyring": "3"}, strs(got)); d != "" {
		t.Errorf("rewritten (-want +got):\n%s", d)
	}
}

func TestCollisionsAreRefused(t *testing.T) {
	_, err := compile(t, Options{}).Found(map[string][]byte{"a/b": nil, "a_b": nil})
	if err == nil || !strings.Contains(err.Error(), `"a/b" and "a_b" both become key "a_b"`) {
		t.Errorf("collision: %v", err)
	}
}

func TestDecoding(t *testing.T) {
	std := base64.StdEncoding.EncodeToString([]byte("\xff\xfe secret"))
	url := base64.URLEncoding.EncodeToString([]byte("\xff\xfe secret"))
	for _, tc := range []struct {
		strategy, in, want, err string
	}{
		{DecodeNone, std, std, ""},
		{DecodeBase64, std, "\xff\xfe secret", ""},
		{DecodeBase64, url, "", "not standard base64"},
		{DecodeBase64URL, url, "\xff\xfe secret", ""},
		{DecodeBase64URL, std, "", "not URL base64"},
		{DecodeAuto, std, "\xff\xfe secret", ""},
		{DecodeAuto, url, "\xff\xfe secret", ""},
		{DecodeAuto, "plain text!", "plain text!", ""},
	} {
		got, err := compile(t, Options{DecodingStrategy: tc.strategy}).Found(map[string][]byte{"k": []byte(tc.in)})
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s(%q): %v, want an error with %q", tc.strategy, tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s(%q): %v", tc.strategy, tc.in, err)
		case tc.err == "" && string(got["k"]) != tc.want:
			t.Errorf("%s(%q) = %q, want %q", tc.strategy, tc.in, got["k"], tc.want)
		}
		if err != nil && strings.Contains(err.Error(), tc.in) {
			t.Errorf("%s: the error quotes the value: %v", tc.strategy, err)
		}
	}
}

func TestCompileNamesTheField(t *testing.T) {
	_, err := Options{ConversionStrategy: "Ascii", DecodingStrategy: "hex", Rewrite: []Rewrite{{}, re("(", ""), {Regexp: &RegexpRewrite{}}, {Transform: &TransformRewrite{}}}}.Compile("objects[2].extract")
	for _, want := range []string{
		`objects[2].extract.conversionStrategy: "Ascii" is not Default or Unicode`,
		`objects[2].extract.decodingStrategy: "hex" is not None, Base64, Base64URL or Auto`,
		`objects[2].extract.rewrite[0]: has no regexp`,
		`objects[2].extract.rewrite[1].regexp.source: does not compile`,
		`objects[2].extract.rewrite[2].regexp.source: is required`,
		`objects[2].extract.rewrite[3].transform: keymount rewrites keys by regular expression only`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want %q", err, want)
		}
	}
}
