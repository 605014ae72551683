package spec

import (
	"regexp"
	"strings"

	"github.com/keymount/keymount/internal/datafrom"
)

// addAll reports each of err's joined errors as its own problem.
func (p *problems) addAll(err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		p.errs = append(p.errs, j.Unwrap()...)
		return
	}
	p.errs = append(p.errs, err)
}

// parseExtract checks an object's extract: its options, and that nothing
// else of the object writes a file (its files are the value's fields under
// the object's file name).
func parseExtract(p *problems, where string, e *objectEntry) *datafrom.Compiled {
	if e.Extract == nil {
		return nil
	}
	c, err := e.Extract.Compile(where + ".extract")
	p.addAll(err)
	if len(e.JMESPath) > 0 {
		p.addf("%s: extract writes every field of the value as its own file; remove jmesPath, or extract in another object", where)
	}
	return c
}

// parseFindObject parses an object with find: no objectName, a type, an
// objectAlias (the directory of the found values), and nothing that names
// one object (version, label, jmesPath, failoverObject, extract).
func parseFindObject(p *problems, where string, e *objectEntry, translate string) Object {
	at := where + ".find"
	o := Object{Alias: e.ObjectAlias, Type: ObjectType(e.ObjectType)}
	switch o.Type {
	case SecretsManager, SSMParameter:
	case "":
		p.addf("%s.objectType: is required with find; set secretsmanager or ssmparameter", where)
	default:
		p.addf("%s.objectType: %s is not secretsmanager or ssmparameter", where, quote(e.ObjectType))
	}
	for _, f := range []struct {
		set  bool
		name string
	}{
		{e.ObjectName != "", "objectName"}, {e.ObjectVersion != "", "objectVersion"},
		{e.ObjectVersionLabel != "", "objectVersionLabel"}, {len(e.JMESPath) > 0, "jmesPath"},
		{e.FailoverObject != nil, "failoverObject"}, {e.Extract != nil, "extract"},
	} {
		if f.set {
			p.addf("%s.%s: find reads the current value of every secret or parameter it matches; remove %s", where, f.name, f.name)
		}
	}
	if o.Alias == "" {
		p.addf("%s.objectAlias: is required with find; set the directory the found values are written to", where)
	} else {
		o.FileName = checkFileName(p, where+".objectAlias", o.Alias, translate)
	}
	o.Find = parseFind(p, at, e.Find, o.Type)
	return o
}

func parseFind(p *problems, at string, f *findEntry, t ObjectType) *Find {
	out := &Find{Path: f.Path, Tags: f.Tags}
	if f.Name != nil && f.Name.Regexp != "" {
		re, err := regexp.Compile(f.Name.Regexp)
		if err != nil {
			p.addf("%s.name.regexp: does not compile as a Go regular expression: %w", at, err)
		}
		out.Name = re
	}
	switch t {
	case SSMParameter:
		if !strings.HasPrefix(f.Path, "/") {
			p.addf("%s.path: is required for ssmparameter and starts with \"/\"; set the parameter path to read, like \"/prod/app\"", at)
		}
		if len(f.Tags) > 0 {
			p.addf("%s.tags: keymount finds parameters by path and name only; remove tags, or select by name.regexp", at)
		}
	case SecretsManager:
		if f.Path == "" && out.Name == nil && len(f.Tags) == 0 {
			p.addf("%s: matches every secret of the account; set path, name.regexp or tags", at)
		}
	}
	for k := range f.Tags {
		if k == "" {
			p.addf("%s.tags: a tag key is empty; name the tag", at)
		}
	}
	c, err := f.Compile(at)
	p.addAll(err)
	out.Keys = c
	return out
}
