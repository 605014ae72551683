package spec

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jmespath-community/go-jmespath"
)

// parseObjects parses and validates the `objects` YAML.
func parseObjects(p *problems, src, translate string, haveFailoverRegion bool, defaultMode os.FileMode, ignore ignoreList) []Object {
	if strings.TrimSpace(src) == "" {
		p.addf("%s: is not set; list the secrets and parameters to mount", KeyObjects)
		return nil
	}
	entries, err := decodeObjects(src)
	if err != nil {
		p.addf("%s: %w", KeyObjects, err)
		return nil
	}
	if len(entries) == 0 {
		p.addf("%s: the list is empty; list the secrets and parameters to mount", KeyObjects)
		return nil
	}
	checkFields(p, src, entries, ignore)
	objs := make([]Object, 0, len(entries))
	files := fileSet{}
	for i := range entries {
		o := parseObject(p, i, &entries[i], translate, haveFailoverRegion, defaultMode)
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
func parseObject(p *problems, i int, e *objectEntry, translate string, haveFailoverRegion bool, defaultMode os.FileMode) Object {
	where := objectWhere(i, e.ObjectName)
	if e.Find != nil {
		o := parseFindObject(p, where, e, translate)
		o.Mode = e.FilePermission.mode(p, where, defaultMode)
		return o
	}
	o := Object{
		Name:         e.ObjectName,
		Alias:        e.ObjectAlias,
		Version:      e.ObjectVersion,
		VersionLabel: e.ObjectVersionLabel,
		Mode:         e.FilePermission.mode(p, where, defaultMode),
	}
	if o.Name == "" {
		p.addf("%s.objectName: is required; set the name or ARN of the secret or parameter", where)
	}
	o.Type = objectType(p, where, o.Name, e.ObjectType)
	checkVersions(p, where, o.Type, o.Version, o.VersionLabel)
	if src := cmp.Or(o.Alias, o.Name); src != "" {
		o.FileName = checkFileName(p, where, src, translate)
	}
	o.JMESPaths = parseJMESPaths(p, where, e.JMESPath, translate, o.Mode)
	o.Extract = parseExtract(p, where, e)
	o.Failover = parseFailover(p, where, e.FailoverObject, &o, haveFailoverRegion)
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

// parseJMESPaths parses an object's jmesPath list. An alias is a file
// name like an objectAlias: path translation applies to it as well, so
// "db/password" is the file "db_password" by default, as the existing
// provider names it.
func parseJMESPaths(p *problems, where string, entries []jmesPathEntry, translate string, mode os.FileMode) []JMESPath {
	if len(entries) == 0 {
		return nil
	}
	out := make([]JMESPath, 0, len(entries))
	for j := range entries {
		e := &entries[j]
		at := fmt.Sprintf("%s.jmesPath[%d]", where, j)
		jp := JMESPath{Path: e.Path, Alias: e.ObjectAlias, Mode: e.FilePermission.mode(p, at, mode)}
		if jp.Path == "" {
			p.addf("%s.path: is required; set the JMESPath expression of the value to extract", at)
		} else if err := compileJMESPath(jp.Path); err != nil {
			p.addf("%s.path: %s does not compile: %w", at, quote(jp.Path), err)
		}
		if jp.Alias == "" {
			p.addf("%s.objectAlias: is required; set the file name of the extracted value", at)
		} else {
			jp.FileName = checkFileName(p, at, jp.Alias, translate)
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
func parseFailover(p *problems, where string, e *failoverEntry, o *Object, haveFailoverRegion bool) *Failover {
	if e == nil {
		return nil
	}
	at := where + ".failoverObject"
	fo := &Failover{Name: e.ObjectName, Version: e.ObjectVersion, VersionLabel: e.ObjectVersionLabel}
	if !haveFailoverRegion {
		p.addf("%s: needs the class's failoverRegion; set failoverRegion or remove failoverObject", at)
	}
	if o.Alias == "" {
		p.addf("%s.objectAlias: is required with failoverObject, so that both regions write the same file; set objectAlias", where)
	}
	if fo.Name == "" {
		p.addf("%s.objectName: is required; set the name or ARN of the object in the failover region", at)
	} else if a, isARN := parseARN(fo.Name); isARN && !a.valid() {
		p.addf("%s.objectName: is not a valid ARN; write arn:partition:service:region:account-id:resource", at)
	} else if isARN && o.Type != "" && a.objectType() != o.Type {
		p.addf("%s.objectName: the ARN's service %s does not match the object's type %s; use an ARN of the same type", at, quote(a.service), o.Type)
	}
	checkVersions(p, at, o.Type, fo.Version, fo.VersionLabel)
	if fo.Version != "" && fo.Version != o.Version {
		p.addf("%s.objectVersion: %s differs from objectVersion %s; make them match or remove it", at, quote(fo.Version), quote(o.Version))
	}
	fo.Version = cmp.Or(fo.Version, o.Version)
	fo.VersionLabel = cmp.Or(fo.VersionLabel, o.VersionLabel)
	return fo
}
