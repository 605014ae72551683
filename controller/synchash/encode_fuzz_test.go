package synchash

import (
	"bytes"
	"reflect"
	"testing"
)

// fuzzContent builds a Content from fuzzed strings: one data pair, one
// label, one annotation and a UID.
func fuzzContent(typ, k, v, lk, lv, uid string) *Content {
	return &Content{
		Type:        typ,
		Data:        map[string][]byte{k: []byte(v)},
		Labels:      map[string]string{lk: lv},
		Annotations: map[string]string{lv: lk},
		SyncUID:     uid,
	}
}

func encoding(c *Content) []byte {
	var b bytes.Buffer
	encode(&sha256Recorder{&b}, c)
	return b.Bytes()
}

// FuzzEncodingIsInjective: two Contents encode alike only when equal,
// however their bytes are split between fields, keys and values.
func FuzzEncodingIsInjective(f *testing.F) {
	f.Add("Opaque", "user", "admin", "app", "web", "u1", 2, 3)
	f.Add("", "", "", "", "", "", 0, 0)
	f.Add("a", "bc", "d", "e", "f", "g", 1, 1)
	f.Fuzz(func(t *testing.T, typ, k, v, lk, lv, uid string, cutA, cutB int) {
		a := fuzzContent(typ, k, v, lk, lv, uid)
		// b moves bytes across the boundary between two adjacent fields.
		all := typ + k + v
		i := clamp(len(typ)+cutA%3-1, len(all))
		j := clamp(len(typ)+len(k)+cutB%3-1, len(all))
		if j < i {
			i, j = j, i
		}
		b := fuzzContent(all[:i], all[i:j], all[j:], lk, lv, uid)
		same := reflect.DeepEqual(a, b)
		if bytes.Equal(encoding(a), encoding(b)) != same {
			t.Errorf("contents equal %v but encodings equal %v:\n%#v\n%#v", same, !same, a.Data, b.Data)
		}
	})
}

func clamp(n, hi int) int {
	return max(0, min(n, hi))
}
