package server

import (
	"strings"
	"testing"
)

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path    string
		wantErr string
	}{
		{"a", ""},
		{"a/b/c.txt", ""},
		{".hidden", ""},
		{"a/..b", ""},
		{"", "empty"},
		{".", "volume itself"},
		{"/a", "absolute"},
		{"a/", "not clean"},
		{"./a", "not clean"},
		{"a//b", "not clean"},
		{"a/../b", "\"..\" element"},
		{"..", "\"..\" element"},
		{"../a", "\"..\" element"},
		{"..data", "starts with"},
		{"..2024_01_01/a", "starts with"},
		{"a\x00b", "NUL"},
	}
	for _, tc := range tests {
		err := ValidatePath(tc.path)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ValidatePath(%q) = %v, want nil", tc.path, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ValidatePath(%q) = %v, want an error containing %q", tc.path, err, tc.wantErr)
		}
	}
}
