package store_test

import (
	"fmt"

	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/aws/store"
)

// objects returns n secrets "s<i>" and m parameters "p<i>".
func objects(n, m int) []spec.Object {
	var out []spec.Object
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		out = append(out, spec.Object{Name: name, Type: spec.SecretsManager, FileName: name, Mode: 0o644})
	}
	for i := range m {
		name := fmt.Sprintf("p%d", i)
		out = append(out, spec.Object{Name: name, Type: spec.SSMParameter, FileName: name, Mode: 0o644})
	}
	return out
}

// contents maps file name to contents.
func contents(res *store.Result) map[string]string {
	out := make(map[string]string, len(res.Files))
	for _, f := range res.Files {
		out[f.Path] = string(f.Contents)
	}
	return out
}

func versions(res *store.Result) map[string]string {
	out := make(map[string]string, len(res.Versions))
	for _, v := range res.Versions {
		out[v.ID] = v.Version
	}
	return out
}
