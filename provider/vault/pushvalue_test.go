package vault

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/internal/vaultkv"
	"github.com/keymount/keymount/provider/server"
)

func TestChangeOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		items   []server.PushItem
		want    vaultkv.Change
		wantErr bool
	}{
		{"object", []server.PushItem{{Value: []byte(`{"user":"u","port":5432}`)}},
			vaultkv.Change{{Object: map[string]any{"user": "u", "port": json.Number("5432")}}}, false},
		{"property", []server.PushItem{{Property: "token", Value: []byte(`{"not":"parsed"}`)}},
			vaultkv.Change{{Field: "token", Value: `{"not":"parsed"}`}}, false},
		{"object then property", []server.PushItem{{Value: []byte(`{}`)}, {Property: "a", Value: []byte("1")}},
			vaultkv.Change{{Object: map[string]any{}}, {Field: "a", Value: "1"}}, false},
		{"a string", []server.PushItem{{Value: []byte(`"s3cr3t"`)}}, nil, true},
		{"null", []server.PushItem{{Value: []byte(`null`)}}, nil, true},
		{"two objects", []server.PushItem{{Value: []byte(`{} {}`)}}, nil, true},
		{"not JSON", []server.PushItem{{Value: []byte(`s3cr3t`)}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := changeOf("secret/data/app", tc.items, true)
			if (err != nil) != tc.wantErr {
				t.Fatalf("changeOf: %v, want error %t", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "secret/data/app") || strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("error %q: want the path named and no value quoted", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("changeOf (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChangeOfRemoval: a removal does not fail on a value that is no
// object: it only needs what the items name.
func TestChangeOfRemoval(t *testing.T) {
	got, err := changeOf("secret/data/app", []server.PushItem{{Value: []byte("x")}}, false)
	if err != nil || len(got) != 1 || got[0].Field != "" || got[0].Object != nil {
		t.Errorf("changeOf for a removal = %v, %v; want one step replacing every field", got, err)
	}
}

// FuzzChangeOf: any value parses or fails cleanly, and a failure never
// quotes the value.
func FuzzChangeOf(f *testing.F) {
	for _, s := range []string{`{"a":"b"}`, `{"n":1.50}`, `[]`, `"x"`, `{`, `{"a":{"b":[1,2]}}`, `{} x`} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "field")
	}
	f.Fuzz(func(t *testing.T, value []byte, property string) {
		c, err := changeOf("kv/app", []server.PushItem{{Value: value, Property: property}}, true)
		if err != nil {
			if property != "" {
				t.Fatalf("an item with a property failed: %v", err)
			}
			if len(value) > 8 && strings.Contains(err.Error(), string(value)) {
				t.Fatalf("error quotes the value: %v", err)
			}
			return
		}
		if len(c) != 1 || (property == "" && c[0].Object == nil) || (property != "" && c[0].Value != string(value)) {
			t.Fatalf("changeOf = %#v", c)
		}
	})
}
