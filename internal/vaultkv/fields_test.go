package vaultkv

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChangeApply(t *testing.T) {
	cur := map[string]any{"user": "u", "port": json.Number("5432")}
	for _, tc := range []struct {
		name string
		c    Change
		cur  map[string]any
		want map[string]any
	}{
		{"a field set, the others kept", Change{{Field: "password", Value: "p"}}, cur,
			map[string]any{"user": "u", "port": json.Number("5432"), "password": "p"}},
		{"an object replaces every field", Change{{Object: map[string]any{"a": "b"}}}, cur, map[string]any{"a": "b"}},
		{"an object, then a field", Change{{Object: map[string]any{"a": "b"}}, {Field: "c", Value: "d"}}, cur,
			map[string]any{"a": "b", "c": "d"}},
		{"nothing there", Change{{Field: "a", Value: "b"}}, nil, map[string]any{"a": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.c.apply(tc.cur)); diff != "" {
				t.Errorf("apply (-want +got):\n%s", diff)
			}
			if _, ok := cur["password"]; ok {
				t.Error("apply changed the current fields")
			}
		})
	}
}

func TestChangeRemoveFrom(t *testing.T) {
	cur := map[string]any{"a": "1", "b": "2"}
	if diff := cmp.Diff(map[string]any{"b": "2"}, Change{{Field: "a"}}.removeFrom(cur)); diff != "" {
		t.Errorf("removing a field (-want +got):\n%s", diff)
	}
	if got := (Change{{Field: "a"}, {Object: nil}}).removeFrom(cur); len(got) != 0 {
		t.Errorf("removing the whole secret left %v", got)
	}
	if len(cur) != 2 {
		t.Error("removeFrom changed the current fields")
	}
}

func TestSameFields(t *testing.T) {
	if !sameFields(map[string]any{"n": json.Number("1"), "s": "x"}, map[string]any{"s": "x", "n": json.Number("1")}) {
		t.Error("the same object in another order is not the same")
	}
	if sameFields(map[string]any{"n": json.Number("1")}, map[string]any{"n": "1"}) {
		t.Error("a number and a string are the same")
	}
}
