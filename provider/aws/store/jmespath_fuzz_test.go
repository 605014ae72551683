package store

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/keymount/keymount/provider/aws/spec"
)

// jmesPathTemplates is the fixed text of the store's jmesPath failures: a
// secret string that happens to be part of it is not a leak.
const jmesPathTemplates = "jmesPath needs a JSON value, the value is not JSON" +
	"|jmesPath : invalid expression|jmesPath : matches nothing|jmesPath : result is not JSON"

// FuzzJMESPath runs the store's jmesPath handling (filesOf through assemble,
// as Fetch does after a store call) on a fuzzed secret value and expression:
// it never panics, and an error never shows the secret value or any string
// in it.
func FuzzJMESPath(f *testing.F) {
	docs := []string{
		`{"username":"app","password":"hunter2-s3cr3t"}`,
		`{"db":{"hosts":["a.internal","b.internal"],"port":5432,"tls":true}}`,
		`[{"k":"v1"},{"k":"v2"}]`,
		`"just-a-string-secret"`,
		`not json at all: s3cr3t`,
		`{"a":null,"b":{"c":[1,2,{"d":"deep-s3cr3t"}]}}`,
		``,
	}
	exprs := []string{
		"password", "db.hosts[0]", "db", "[*].k", "a", "b.c[2].d", "missing",
		"length(@)", "keys(@)", "to_number(password)", "@", "[", "a.b.c.d.e",
		"db.hosts[?@ == 'a.internal']", "join(',', db.hosts)", "abs(password)",
	}
	for i, d := range docs {
		for j, e := range exprs {
			if (i+j)%3 == 0 {
				f.Add(d, e)
			}
		}
	}
	f.Fuzz(func(t *testing.T, doc, path string) {
		o := spec.Object{
			Name: "s", Type: spec.SecretsManager, FileName: "s", Mode: 0o644,
			JMESPaths: []spec.JMESPath{{Path: path, Alias: "extracted/value", FileName: "extracted_value"}},
		}
		it := primaryItem(&o, "us-east-1")
		vals := map[item]value{it: {data: []byte(doc), version: "v1"}}
		res, err := assemble([]spec.Object{o}, []item{it}, []*found{nil}, vals, nil)
		if err == nil {
			if len(res.Files) != 2 || string(res.Files[0].Contents) != doc || res.Files[1].Path != "extracted_value" {
				t.Fatalf("files = %v", res.Files)
			}
			return
		}
		if res != nil {
			t.Fatalf("result %v with error %v", res, err)
		}
		var fe *FetchError
		if !errors.As(err, &fe) || len(fe.Objects) != 1 || fe.Objects[0].Kind != KindInvalid {
			t.Fatalf("error = %#v, want one invalid object", err)
		}
		if !strings.Contains(err.Error(), fe.Objects[0].Reason) {
			t.Fatalf("error %q does not carry the reason %q", err, fe.Objects[0].Reason)
		}
		// What the reason says beyond the expression (which the class
		// author wrote, and which may spell anything) must not come from
		// the secret.
		msg := strings.ReplaceAll(fe.Objects[0].Reason, strconv.Quote(path), "")
		for _, s := range secretStrings(doc) {
			if strings.Contains(msg, s) && !strings.Contains(jmesPathTemplates, s) && !strings.Contains(path, s) {
				t.Fatalf("error %q shows %q from the secret", err, s)
			}
		}
	})
}

// secretStrings is the secret as a whole plus every string and key in it
// when it is JSON.
func secretStrings(doc string) []string {
	out := []string{}
	if len(doc) >= 4 {
		out = append(out, doc)
	}
	var v any
	if json.Unmarshal([]byte(doc), &v) != nil {
		return out
	}
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			if x != "" {
				out = append(out, x)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				if k != "" {
					out = append(out, k)
				}
				walk(e)
			}
		}
	}
	walk(v)
	return out
}
