package template

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var objects = map[string][]byte{
	"username":    []byte("admin"),
	"db-password": []byte("s3cr3t"),
	"dburl":       []byte("postgres://db:5432/app"),
	"json":        []byte(`{"user":"u","port":5432,"tags":["a","b"]}`),
	"yaml":        []byte("user: u\nport: 5432\n"),
	"b64":         []byte("aGVsbG8="),
	"lines":       []byte("one\ntwo"),
}

func TestRenderFunctionFamilies(t *testing.T) {
	tests := []struct {
		family, text, want string
	}{
		{"data", `{{ .username }}:{{ index . "db-password" }}`, "admin:s3cr3t"},
		{"strings", `{{ .dburl | replace "postgres://" "postgresql://" }}`, "postgresql://db:5432/app"},
		{"strings", `{{ upper .username }} {{ .username | title }} {{ trunc 3 .username }} {{ repeat 3 "ab" }}`, "ADMIN Admin adm ababab"},
		{"strings", `{{ quote .username }} {{ squote .username }} {{ cat "a" "b" }} {{ trimPrefix "ad" .username }}`, `"admin" 'admin' a b min`},
		{"strings", `{{ .lines | indent 2 }}|{{ .lines | nindent 1 }}`, "  one\n  two|\n one\n two"},
		{"strings", `{{ join "," (splitList "\n" .lines) }} {{ wrapWith 2 "-" "abcd" }}`, "one,two ab-cd"},
		{"strings", `{{ regexReplaceAll "([a-z]+)://" .dburl "${1}+ssl://" }} {{ regexReplaceAllLiteral "a" "banana" "$1" }}`, "postgres+ssl://db:5432/app b$1n$1n$1"},
		{"strings", `{{ regexFind "[0-9]+" .dburl }} {{ regexMatch "^post" .dburl }} {{ printf "%05d|%-4s|" 42 "x" }}`, "5432 true 00042|x   |"},
		{"encoding", `{{ b64enc .username }} {{ b64dec .b64 }} {{ b32enc "hi" | b32dec }} {{ sha256sum "a" | trunc 8 }}`, "YWRtaW4= hello hi ca978112"},
		{"encoding", `{{ $j := fromJson .json }}{{ $j.user }} {{ $j.port }} {{ index $j.tags 1 }} {{ toJson (dict "k" .username) }}`, `u 5432 b {"k":"admin"}`},
		{"encoding", `{{ $y := fromYaml .yaml }}{{ $y.user }}|{{ toYaml (dict "a" 1 "b" (list "x")) }}|`, "u|a: 1\nb:\n- x|"},
		{"encoding", `{{ toPrettyJson (list 1) }} {{ urlJoin (dict "scheme" "https" "host" "h") }}`, "[\n  1\n] https://h"},
		{"lists", `{{ list 3 1 2 | sortAlpha | join "" }} {{ first (list "a" "b") }} {{ last (list "a" "b") }} {{ until 3 | join "" }} {{ seq 3 }}`, "123 a b 012 1 2 3"},
		{"lists", `{{ $l := list "a" }}{{ $l = append $l "b" }}{{ join "+" $l }} {{ has "b" $l }} {{ without $l "a" | join "" }} {{ untilStep 0 10 4 | join "," }}`, "a+b true b 0,4,8"},
		{"dicts", `{{ $d := dict "a" "1" "b" "2" }}{{ get $d "a" }} {{ hasKey $d "c" }} {{ keys $d | sortAlpha | join "" }} {{ (merge (dict "x" "y") $d).x }} {{ dig "a" "-" $d }}`, "1 false ab y 1"},
		{"math", `{{ add 1 2 }} {{ sub 5 3 }} {{ mul 2 3 }} {{ div 7 2 }} {{ mod 7 2 }} {{ max 1 9 4 }} {{ floor 1.7 }} {{ atoi "12" | add1 }}`, "3 2 6 3 1 9 1 13"},
		{"flow", `{{ default "x" "" }} {{ empty "" }} {{ coalesce "" "y" }} {{ ternary "t" "f" true }} {{ kindOf 1 }} {{ semverCompare ">=1.2" "1.3.0" }} {{ base "a/b.txt" }}`, "x true y t int true b.txt"},
		{"builtins", `{{ if eq .username "admin" }}yes{{ end }} {{ len .username }} {{ and true false }} {{ print "a" 1 }}`, "yes 5 false a1"},
		{"templates", `{{ define "u" }}<{{ . }}>{{ end }}{{ template "u" .username }}{{ block "b" . }}{{ .username }}{{ end }}`, "<admin>admin"},
	}
	for _, tt := range tests {
		t.Run(tt.family+"/"+tt.text, func(t *testing.T) {
			got, err := Render("test", tt.text, objects)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Render = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUnsafeFunctionsAbsent: nothing that reads the environment, files, the
// network, the clock or a random source is callable.
func TestUnsafeFunctionsAbsent(t *testing.T) {
	names := Functions()
	for _, fn := range []string{
		"env", "expandenv", "getHostByName", "now", "ago", "date", "dateInZone", "htmlDate",
		"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4",
		"shuffle", "bcrypt", "htpasswd", "genPrivateKey", "genCA", "genSelfSignedCert",
		"genSignedCert", "encryptAES", "derivePassword", "osBase",
	} {
		if slices.Contains(names, fn) {
			t.Errorf("Functions() contains %q", fn)
		}
		_, err := Render("unsafe", "{{ "+fn+" }}", nil)
		if err == nil || !strings.Contains(err.Error(), `function "`+fn+`" not defined`) {
			t.Errorf("Render({{ %s }}) error = %v, want function not defined", fn, err)
		}
	}
}

func TestFunctionsCoverESOHelpers(t *testing.T) {
	names := Functions()
	for _, fn := range []string{
		"b64enc", "b64dec", "toJson", "fromJson", "toYaml", "fromYaml", "pkcs12key", "pkcs12keyPass",
		"pkcs12cert", "pkcs12certPass", "pemToPkcs12", "pemToPkcs12Pass", "fullPemToPkcs12",
		"fullPemToPkcs12Pass", "filterPEM", "filterCertChain", "jwkPublicKeyPem", "jwkPrivateKeyPem",
	} {
		if !slices.Contains(names, fn) {
			t.Errorf("Functions() lacks %q", fn)
		}
	}
}

func TestDecodersFail(t *testing.T) {
	for _, text := range []string{
		`{{ b64dec "!!" }}`, `{{ b32dec "!!" }}`, `{{ fromJson "{" }}`, `{{ fromYaml "a: [" }}`,
		`{{ regexReplaceAll "(" "x" "y" }}`, `{{ fail "boom" }}`, `{{ div 1 0 }}`,
	} {
		_, err := Render("dec", text, nil)
		if err == nil {
			t.Errorf("Render(%s) = nil error, want one", text)
			continue
		}
		if !strings.Contains(err.Error(), `"dec"`) {
			t.Errorf("Render(%s) error %q does not name the template", text, err)
		}
	}
}

func TestRegexReplaceMatchesRegexp(t *testing.T) {
	for _, tc := range [][3]string{
		{"a*", "baaac", "-"}, {"", "abc", "."}, {"(x)(y)?", "xyx", "[$1$2]"}, {"b", "abcb", "${0}${0}"},
	} {
		got, err := regexReplaceAll(tc[0], tc[1], tc[2])
		if err != nil {
			t.Fatal(err)
		}
		want := regexpReplace(tc[0], tc[1], tc[2])
		if got != want {
			t.Errorf("regexReplaceAll(%q, %q, %q) = %q, want %q", tc[0], tc[1], tc[2], got, want)
		}
	}
}

func TestErrorsNameTemplateLineAndKey(t *testing.T) {
	_, err := Render("keymount.io/template.config", "user: {{ .username }}\npass: {{ .password }}\n", objects)
	if err == nil {
		t.Fatal("Render with a missing key: nil error")
	}
	for _, want := range []string{"keymount.io/template.config", "line 2, column 9", `"password"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	_, err = Render("i", "ok\n{{ index . \"db-passwrod\" }}", objects)
	if err == nil || !strings.Contains(err.Error(), `template "i": line 2,`) || !strings.Contains(err.Error(), `"db-passwrod"`) {
		t.Errorf("index of a missing key: error %v, want one naming line 2 and the key", err)
	}
	for _, text := range []string{`{{ index (list 1) 3 }}`, `{{ index (list 1) "a" }}`, `{{ index 5 1 }}`, `{{ index (fromJson .json) "tags" 9 }}`} {
		if _, err := Render("i", text, objects); err == nil {
			t.Errorf("Render(%s): nil error", text)
		}
	}
	if out, err := Render("i", `{{ index (fromJson .json) "tags" 1 }}{{ index "ab" 1 }}{{ index (list (list 7)) 0 0 }}`, objects); err != nil || string(out) != "b987" {
		t.Errorf("index = %q, %v; want b987 (98 is 'b')", out, err)
	}
	_, err = Render("p", "ok\n{{ .username | nosuch }}", objects)
	if err == nil || !strings.Contains(err.Error(), "p:2:") || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("parse error = %v, want it to name line 2 and the function", err)
	}
	if Validate("p", "{{ if }}") == nil {
		t.Error("Validate accepted a syntax error")
	}
	if errors.Is(err, ErrLimit) {
		t.Error("a parse error is not a limit")
	}
}

// TestErrorsRedactValues: a function error that quotes its argument does not
// carry an object's value out (url.Parse quotes the URL), whole or a line of
// it, and names the function instead.
func TestErrorsRedactValues(t *testing.T) {
	objs := map[string][]byte{"dsn": []byte("postgres://u:s3cr3t-pw@ho st/db\n"), "pem": []byte("line-one-secret\nline-two-secret\n")}
	for _, tc := range []struct{ text, fn string }{
		{`{{ urlParse .dsn }}`, "urlParse"}, {`{{ mustRegexMatch (print "(" .pem) "x" }}`, "mustRegexMatch"},
		{`{{ fail (print "got " .dsn) }}`, "fail"}, {`{{ index . (trim .dsn) }}`, "index"},
	} {
		_, err := Render("r", tc.text, objs)
		if err == nil {
			t.Fatalf("Render(%s): nil error", tc.text)
		}
		for _, v := range []string{"s3cr3t-pw", "line-one-secret", "line-two-secret"} {
			if strings.Contains(err.Error(), v) {
				t.Errorf("Render(%s) error %q carries a value", tc.text, err)
			}
		}
		if !strings.Contains(err.Error(), "error calling "+tc.fn) || !strings.Contains(err.Error(), `template "r": line 1, column 3`) {
			t.Errorf("Render(%s) error %q: want it to name the template, line, column and %s", tc.text, err, tc.fn)
		}
	}
}
