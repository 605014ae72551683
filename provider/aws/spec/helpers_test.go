package spec

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

const smARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:MySecret-a1b2c3"

// attrsWith returns mount attributes with objects set and extra merged in.
func attrsWith(objects string, extra map[string]string) map[string]string {
	attrs := map[string]string{KeyObjects: objects}
	maps.Copy(attrs, extra)
	return attrs
}

// wantErrs checks that err wraps ErrInvalid and mentions every substring.
func wantErrs(t *testing.T, err error, subs ...string) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error = %v, want one wrapping ErrInvalid", err)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error does not mention %q:\n%v", s, err)
		}
	}
}

// mustParse parses and fails the test on an error.
func mustParse(t *testing.T, attrs map[string]string) *Spec {
	t.Helper()
	s, err := Parse(attrs, 0o644)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}
