package driver

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// FuzzMountGroup feeds parseMountGroup arbitrary volume_mount_group
// values. Whatever comes in, nothing panics; an accepted value is empty (no
// group) or decimal digits only, naming a group ID from 0 to 2147483647
// that the record spells canonically; everything else is an invalid
// request.
func FuzzMountGroup(f *testing.F) {
	for _, s := range []string{"", "0", "1000", "2147483647", "2147483648", "-1", "+1", " 1", "0x10", "007", "1_0", "\u0661"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := &publishRequest{}
		err := p.parseMountGroup(s)
		if err != nil {
			if !errors.Is(err, errInvalidRequest) || p.mountGroup != "" {
				t.Fatalf("%q: err %v, group %q; want an invalid request and no group", s, err, p.mountGroup)
			}
			return
		}
		if s == "" {
			if p.gid != noMountGroup || p.mountGroup != "" {
				t.Fatalf("empty: gid %d, group %q; want none", p.gid, p.mountGroup)
			}
			return
		}
		if strings.Trim(s, "0123456789") != "" || p.gid < 0 || p.gid > maxMountGroup || p.mountGroup != strconv.Itoa(p.gid) {
			t.Fatalf("accepted %q as gid %d, group %q", s, p.gid, p.mountGroup)
		}
		if n, _ := strconv.ParseInt(s, 10, 64); n != int64(p.gid) {
			t.Fatalf("accepted %q as gid %d", s, p.gid)
		}
	})
}
