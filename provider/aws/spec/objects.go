package spec

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jmespath-community/go-jmespath"
	"sigs.k8s.io/yaml"
)

// parseObjects parses and validates the `objects` YAML.
func parseObjects(p *problems, src, translate string, haveFailoverRegion bool, defaultMode os.FileMode) []Object {
	if strings.TrimSpace(src) == "" {
		p.addf("%s: is not set; list the secrets and parameters to mount", KeyObjects)
		return nil
	}
	var list []any
	if err := yaml.UnmarshalStrict([]byte(src), &list); err != nil {
		p.addf("%s: is not a YAML list of objects: %w", KeyObjects, err)
		return nil
	}
	if len(list) == 0 {
		p.addf("%s: the list is empty; list the secrets and parameters to mount", KeyObjects)
		return nil
	}
	objs := make([]Object, 0, len(list))
	files := fileSet{}
	for i, v := range list {
		o := parseObject(p, i, v, translate, haveFailoverRegion, defaultMode)
		where := objectWhere(i, o.Name)
		files.add(p, where, o.FileName)
		for j, jp := range o.JMESPaths {
			files.add(p, fmt.Sprintf("%s.jmesPath[%d]", where, j), jp.FileName)
		}
		objs = append(objs, o)
	}
	files.checkDirs(p)
	return objs
}

// parseObject parses entry i of `objects`.
func parseObject(p *problems, i int, v any, translate string, haveFailoverRegion bool, defaultMode os.FileMode) Object {
	f, ok := newFields(p, fmt.Sprintf("objects[%d]", i), v, objectKeys)
	if !ok {
		return Object{}
	}
	o := Object{Name: f.str("objectName")}
	f.where = objectWhere(i, o.Name)
	f.checkKeys(objectKeys)
	o.Alias = f.str("objectAlias")
	o.Version = f.str("objectVersion")
	o.VersionLabel = f.str("objectVersionLabel")
	o.Mode = f.mode("filePermission", defaultMode)
	if !f.has("objectName") {
		p.addf("%s.objectName: is required; set the name or ARN of the secret or parameter", f.where)
	}
	o.Type = objectType(p, f.where, o.Name, f.str("objectType"))
	checkVersions(p, f.where, o.Type, o.Version, o.VersionLabel)
	if src := cmp.Or(o.Alias, o.Name); src != "" {
		o.FileName = checkFileName(p, f.where, src, translate)
	}
	o.JMESPaths = parseJMESPaths(p, f.where, f.m["jmesPath"], translate, o.Mode)
	o.Failover = parseFailover(p, f.where, f.m["failoverObject"], &o, haveFailoverRegion)
	return o
}

// objectType returns the given objectType, or the one inferred from an ARN.
func objectType(p *problems, where, name, given string) ObjectType {
	a, isARN := parseARN(name)
	if isARN && !a.valid() {
		p.addf("%s.objectName: is not a valid ARN; write arn:partition:service:region:account-id:resource", where)
		isARN = false
	}
	var t ObjectType
	switch given {
	case "":
		if !isARN {
			if name != "" {
				p.addf("%s.objectType: is required when objectName is not an ARN; set secretsmanager or ssmparameter", where)
			}
			return ""
		}
		if t = a.objectType(); t == "" {
			p.addf("%s.objectName: the ARN's service %s is not secretsmanager or ssm; use the ARN of a secret or parameter", where, quote(a.service))
		}
		return t
	case string(SecretsManager), string(SSMParameter):
		t = ObjectType(given)
	default:
		p.addf("%s.objectType: %s is not secretsmanager or ssmparameter", where, quote(given))
		return ""
	}
	if isARN && a.objectType() != t {
		p.addf("%s.objectType: %s does not match the ARN's service %s; remove objectType or fix the ARN", where, quote(given), quote(a.service))
	}
	return t
}

// checkVersions checks objectVersion and objectVersionLabel for type t.
func checkVersions(p *problems, where string, t ObjectType, version, label string) {
	switch t {
	case SSMParameter:
		if version != "" && label != "" {
			p.addf("%s: an SSM parameter takes objectVersion or objectVersionLabel, not both; remove one", where)
		}
		if n, err := strconv.ParseUint(version, 10, 63); version != "" && (err != nil || n == 0) {
			p.addf("%s.objectVersion: %s is not an SSM parameter version; use a positive whole number like \"3\"", where, quote(version))
		}
	case SecretsManager:
		if version != "" && !isVersionID(version) {
			p.addf("%s.objectVersion: %s is not a Secrets Manager version ID (32 to 64 characters, like a UUID); use objectVersionLabel for a staging label such as AWSCURRENT", where, quote(version))
		}
	}
}

// isVersionID reports whether v could be a Secrets Manager VersionId.
func isVersionID(v string) bool {
	if len(v) < 32 || len(v) > 64 {
		return false
	}
	for i := range len(v) {
		if v[i] <= ' ' || v[i] >= 0x7f {
			return false
		}
	}
	return true
}

// parseJMESPaths parses an object's jmesPath list.
func parseJMESPaths(p *problems, where string, v any, translate string, mode os.FileMode) []JMESPath {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		p.addf("%s.jmesPath: is a %s; write a list of {path, objectAlias, filePermission}", where, yamlKind(v))
		return nil
	}
	out := make([]JMESPath, 0, len(list))
	for j, e := range list {
		f, ok := newFields(p, fmt.Sprintf("%s.jmesPath[%d]", where, j), e, jmesPathKeys)
		if !ok {
			continue
		}
		f.checkKeys(jmesPathKeys)
		jp := JMESPath{Path: f.str("path"), Alias: f.str("objectAlias"), Mode: f.mode("filePermission", mode)}
		if !f.has("path") {
			p.addf("%s.path: is required; set the JMESPath expression of the value to extract", f.where)
		} else if jp.Path != "" {
			if err := compileJMESPath(jp.Path); err != nil {
				p.addf("%s.path: %s does not compile: %w", f.where, quote(jp.Path), err)
			}
		}
		if !f.has("objectAlias") {
			p.addf("%s.objectAlias: is required; set the file name of the extracted value", f.where)
		} else if jp.Alias != "" {
			jp.FileName = checkFileName(p, f.where, jp.Alias, translate)
		}
		out = append(out, jp)
	}
	return out
}

// compileJMESPath compiles expr, turning a parser panic into an error.
func compileJMESPath(expr string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the JMESPath parser failed: %v", r)
		}
	}()
	_, err = jmespath.Compile(expr)
	return err
}

// parseFailover parses an object's failoverObject. Its version and label
// default to the object's, as the existing provider does.
func parseFailover(p *problems, where string, v any, o *Object, haveFailoverRegion bool) *Failover {
	if v == nil {
		return nil
	}
	f, ok := newFields(p, where+".failoverObject", v, failoverKeys)
	if !ok {
		return nil
	}
	f.checkKeys(failoverKeys)
	fo := &Failover{Name: f.str("objectName"), Version: f.str("objectVersion"), VersionLabel: f.str("objectVersionLabel")}
	if !haveFailoverRegion {
		p.addf("%s: needs the class's failoverRegion; set failoverRegion or remove failoverObject", f.where)
	}
	if o.Alias == "" {
		p.addf("%s.objectAlias: is required with failoverObject, so that both regions write the same file; set objectAlias", where)
	}
	if !f.has("objectName") {
		p.addf("%s.objectName: is required; set the name or ARN of the object in the failover region", f.where)
	} else if a, isARN := parseARN(fo.Name); isARN && !a.valid() {
		p.addf("%s.objectName: is not a valid ARN; write arn:partition:service:region:account-id:resource", f.where)
	} else if isARN && o.Type != "" && a.objectType() != o.Type {
		p.addf("%s.objectName: the ARN's service %s does not match the object's type %s; use an ARN of the same type", f.where, quote(a.service), o.Type)
	}
	checkVersions(p, f.where, o.Type, fo.Version, fo.VersionLabel)
	if fo.Version != "" && fo.Version != o.Version {
		p.addf("%s.objectVersion: %s differs from objectVersion %s; make them match or remove it", f.where, quote(fo.Version), quote(o.Version))
	}
	fo.Version = cmp.Or(fo.Version, o.Version)
	fo.VersionLabel = cmp.Or(fo.VersionLabel, o.VersionLabel)
	return fo
}
