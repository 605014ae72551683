package vaultmsg

import "testing"

func TestJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"one folded error", []string{"1 error occurred:\n\t* permission denied\n\n"}, "permission denied"},
		{"two folded errors", []string{"2 errors occurred:\n\t* permission denied\n\t* invalid token\n\n"}, "permission denied; invalid token"},
		{"a folded error over two lines", []string{"1 error occurred:\n\t* role \"x\" not found\nsee the docs\n\n"}, "role \"x\" not found\nsee the docs"},
		{"plain messages", []string{"permission denied", "Vault is sealed"}, "permission denied; Vault is sealed"},
		{"folded and plain", []string{"1 error occurred:\n\t* a\n\n", " b "}, "a; b"},
		{"empty messages", []string{"", "1 error occurred:\n\t* \n\n"}, ""},
		{"none", nil, ""},
		{"a message that only mentions errors", []string{"3 errors occurred while writing"}, "3 errors occurred while writing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Join(tc.in); got != tc.want {
				t.Errorf("Join(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzJoin: any message set joins without panicking, and a plain message
// without the list head comes back trimmed.
func FuzzJoin(f *testing.F) {
	f.Add("1 error occurred:\n\t* permission denied\n\n")
	f.Add("permission denied")
	f.Fuzz(func(t *testing.T, m string) {
		got := Join([]string{m})
		if !folded.MatchString(m) && got != "" && len(got) > len(m) {
			t.Errorf("Join(%q) = %q: longer than the message", m, got)
		}
	})
}
