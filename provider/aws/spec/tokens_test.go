package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTokens(t *testing.T) {
	tests := []struct {
		name   string
		tokens string
		want   map[string]string
	}{
		{"absent", "", nil},
		{"empty object", `{}`, map[string]string{}},
		{"two audiences", `{"sts.amazonaws.com": {"token": "t1", "expirationTimestamp": "2030-01-01T00:00:00Z"}, "pods.eks.amazonaws.com": {"token": "t2"}}`,
			map[string]string{"sts.amazonaws.com": "t1", "pods.eks.amazonaws.com": "t2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, attrsWith(oneObject, map[string]string{KeyTokens: tt.tokens}))
			if diff := cmp.Diff(tt.want, s.Tokens); diff != "" {
				t.Errorf("Tokens (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTokensErrors(t *testing.T) {
	const secret = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0"
	tests := []struct {
		name   string
		tokens string
		want   string
	}{
		{"not JSON", `{"sts": {"token": "` + secret + `"`, "is not a JSON object of audience"},
		{"a list", `["` + secret + `"]`, "is not a JSON object of audience"},
		{"null", `null`, "is not a JSON object of audience"},
		{"token not a string", `{"sts": {"token": 1, "x": "` + secret + `"}}`, "is not a JSON object of audience"},
		{"entry a string", `{"sts": "` + secret + `"}`, "is not a JSON object of audience"},
		{"empty token", `{"sts": {"token": ""}, "b": {"token": "` + secret + `"}}`, `the token for audience "sts" is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(attrsWith(oneObject, map[string]string{KeyTokens: tt.tokens}), 0o644)
			wantErrs(t, err, tt.want)
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the token: %v", err)
			}
		})
	}
}
