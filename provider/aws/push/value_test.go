package push

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keymount/keymount/provider/server"
)

func TestApply(t *testing.T) {
	prop := func(p, v string) server.PushItem { return server.PushItem{Property: p, Value: []byte(v)} }
	str := func(s string) *content { return &content{data: []byte(s)} }
	tests := []struct {
		name  string
		cur   *content
		items []server.PushItem
		want  string
		bin   bool
		same  bool
		err   string
	}{
		{"whole over nothing", nil, []server.PushItem{{Value: []byte("v")}}, "v", false, false, ""},
		{"whole, identical", str("v"), []server.PushItem{{Value: []byte("v")}}, "v", false, true, ""},
		{"whole, binary", nil, []server.PushItem{{Value: []byte{0xff, 0}}}, "\xff\x00", true, false, ""},
		{"binary is not the string of its bytes", str("\xff"), []server.PushItem{{Value: []byte{0xff}}}, "\xff", true, false, ""},
		{"property over nothing", nil, []server.PushItem{prop("a", "1")}, `{"a":"1"}`, false, false, ""},
		{"property kept others", str(`{"b": 2, "a": "0"}`), []server.PushItem{prop("a", "1")}, `{"a":"1","b":2}`, false, false, ""},
		{"property identical, spacing kept", str(`{ "a" : "1" }`), []server.PushItem{prop("a", "1")}, `{ "a" : "1" }`, false, true, ""},
		{"property that is a number is not the string", str(`{"a":1}`), []server.PushItem{prop("a", "1")}, `{"a":"1"}`, false, false, ""},
		{"not an object", str(`["a"]`), []server.PushItem{prop("a", "1")}, "", false, false, "not a JSON object"},
		{"null", str(`null`), []server.PushItem{prop("a", "1")}, "", false, false, "not a JSON object"},
		{"binary current", &content{data: []byte(`{}`), binary: true}, []server.PushItem{prop("a", "1")}, "", false, false, "not a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, same, err := apply(tc.cur, tc.items)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got.data) != tc.want || got.binary != tc.bin || same != tc.same {
				t.Errorf("apply = %q binary %v same %v, want %q binary %v same %v", got.data, got.binary, same, tc.want, tc.bin, tc.same)
			}
		})
	}
}

func TestWithout(t *testing.T) {
	cur := &content{data: []byte(`{"a":"1","b":{"x":1}}`)}
	got, empty, err := without(cur, []server.PushItem{{Property: "a"}})
	if err != nil || empty || string(got.data) != `{"b":{"x":1}}` {
		t.Errorf("without a = %q empty %v err %v", got.data, empty, err)
	}
	if _, empty, err = without(cur, []server.PushItem{{Property: "a"}, {Property: "b"}}); err != nil || !empty {
		t.Errorf("without a, b: empty %v err %v", empty, err)
	}
	if _, _, err = without(&content{data: []byte("plain")}, []server.PushItem{{Property: "a"}}); err == nil {
		t.Error("without of a plain value: no error")
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		kind  kind
		items []server.PushItem
		err   string
	}{
		{"one whole", secret, []server.PushItem{{Value: []byte("v")}}, ""},
		{"properties", secret, []server.PushItem{{Property: "a"}, {Property: "b"}}, ""},
		{"whole and property", secret, []server.PushItem{{}, {Property: "b"}}, "2 items write it"},
		{"two wholes", parameter, []server.PushItem{{}, {}}, "2 items write it"},
		{"same property", secret, []server.PushItem{{Property: "a"}, {Property: "a"}}, `property "a" is written by two items`},
		{"ssm property", parameter, []server.PushItem{{Property: "a"}}, "an SSM parameter holds one value: remove property"},
		{"property not UTF-8", secret, []server.PushItem{{Property: "\xa0"}}, "not valid UTF-8"},
		{"binary property", secret, []server.PushItem{{Property: "a", Value: []byte{0xff}}}, "push it without property"},
		{"ssm binary", parameter, []server.PushItem{{Value: []byte{0xff}}}, "not valid UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := check(tc.kind, tc.items)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("check = %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzApply: whatever the store holds, applying a property either fails
// (not a JSON object) or gives a JSON object holding the property's value
// and every other key of the current one; an identical answer is the
// current value itself.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"a":"1","b":2}`), "a", []byte("x"))
	f.Add([]byte(`{"a":"x"}`), "a", []byte("x"))
	f.Add([]byte(`[]`), "", []byte{0xff})
	f.Fuzz(func(t *testing.T, cur []byte, prop string, value []byte) {
		items := []server.PushItem{{Property: prop + "k", Value: value}}
		if check(secret, items) != nil {
			return
		}
		got, same, err := apply(&content{data: cur}, items)
		if err != nil {
			return
		}
		if same {
			if diff := cmp.Diff(cur, got.data); diff != "" {
				t.Fatalf("identical but another value: %s", diff)
			}
		}
		var before, after map[string]json.RawMessage
		_ = json.Unmarshal(cur, &before)
		if err := json.Unmarshal(got.data, &after); err != nil {
			t.Fatalf("result is not a JSON object: %v", err)
		}
		var v string
		if err := json.Unmarshal(after[prop+"k"], &v); err != nil || v != string(value) {
			t.Fatalf("property holds %q (%v), want the value", v, err)
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Fatalf("key %q lost", k)
			}
		}
	})
}
