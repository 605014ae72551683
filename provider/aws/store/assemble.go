package store

import (
	"encoding/json"
	"errors"

	"github.com/jmespath-community/go-jmespath"

	"github.com/keymount/keymount/internal/datafrom"
	"github.com/keymount/keymount/provider/aws/spec"
	"github.com/keymount/keymount/provider/server"
)

// assemble turns the values into files and versions, in the order of the
// objects, or returns every object failure at once. finds holds what each
// find object matched (nil for the others).
func assemble(objects []spec.Object, used []item, finds []*found, vals map[item]value, fails map[item]*objectFailure) (*Result, error) {
	res := &Result{}
	var errs []ObjectError
	for i := range objects {
		o := &objects[i]
		if f := finds[i]; f != nil {
			fail := f.fail
			var files []server.File
			var version string
			if fail == nil {
				files, version, fail = foundFiles(o, f, vals, fails)
			}
			if fail != nil {
				errs = append(errs, findError(o, f.region, fail))
				continue
			}
			res.Files = append(res.Files, files...)
			res.Versions = append(res.Versions, server.ObjectVersion{ID: o.FileName, Version: version})
			continue
		}
		v, ok := vals[used[i]]
		if !ok {
			f := fails[used[i]]
			if f == nil {
				f = failure(KindInternal, "not fetched")
			}
			errs = append(errs, objectError(o, used[i], f))
			continue
		}
		files, err := filesOf(o, v)
		if err != nil {
			errs = append(errs, objectError(o, used[i], err))
			continue
		}
		res.Files = append(res.Files, files...)
		res.Versions = append(res.Versions, server.ObjectVersion{ID: o.FileName, Version: v.version})
	}
	if len(errs) > 0 {
		return nil, &FetchError{Objects: errs}
	}
	return res, nil
}

// objectError is failure f of object o, asked for as it.
func objectError(o *spec.Object, it item, f *objectFailure) ObjectError {
	return ObjectError{
		FileName: o.FileName, Type: string(it.typ), Object: it.name, Region: it.region,
		Version: it.version, Label: it.label,
		Kind: f.kind, Reason: f.reason, Code: f.code,
	}
}

// filesOf is the object's file plus one file per JMESPath entry, or with
// extract one file per field of the value under the object's file name.
func filesOf(o *spec.Object, v value) ([]server.File, *objectFailure) {
	if o.Extract != nil {
		return extractedFiles(o, v)
	}
	files := []server.File{{Path: o.FileName, Mode: o.Mode, Contents: v.data}}
	if len(o.JMESPaths) == 0 {
		return files, nil
	}
	var doc any
	if err := json.Unmarshal(v.data, &doc); err != nil {
		return nil, failure(KindInvalid, "jmesPath needs a JSON value, the value is not JSON")
	}
	for _, jp := range o.JMESPaths {
		data, f := extract(doc, jp.Path)
		if f != nil {
			return nil, f
		}
		mode := jp.Mode
		if mode == 0 {
			mode = o.Mode
		}
		files = append(files, server.File{Path: jp.FileName, Mode: mode, Contents: data})
	}
	return files, nil
}

// extract evaluates one JMESPath expression: a string result is written as
// is, any other JSON value marshalled.
func extract(doc any, path string) ([]byte, *objectFailure) {
	got, err := jmespath.Search(path, doc)
	if err != nil {
		return nil, failure(KindInvalid, "jmesPath %q: invalid expression", path)
	}
	switch x := got.(type) {
	case nil:
		return nil, failure(KindInvalid, "jmesPath %q: matches nothing", path)
	case string:
		return []byte(x), nil
	default:
		data, err := json.Marshal(x)
		if err != nil {
			return nil, failure(KindInvalid, "jmesPath %q: result is not JSON", path)
		}
		return data, nil
	}
}

// extractedFiles is every field of the object's JSON value as its own file
// under the object's file name (keymount's extract). The failure names
// keys, never values.
func extractedFiles(o *spec.Object, v value) ([]server.File, *objectFailure) {
	keys, err := o.Extract.Extract(v.data)
	switch {
	case errors.Is(err, datafrom.ErrNotObject):
		return nil, failure(KindInvalid, "extract needs a JSON object, the value is not one")
	case err != nil:
		return nil, failure(KindInvalid, "extract: %s", err)
	}
	return server.DirFiles(o.FileName, o.Mode, keys), nil
}
