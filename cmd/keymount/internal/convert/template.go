package convert

import (
	"k8s.io/apimachinery/pkg/util/validation"
)

// esoTemplate converts spec.target.template's data: each key becomes a
// keymount.io/template.<key> annotation of the SecretSync, rendered by
// keymount-controller with Go text/template over the provider's files
// (named after the ExternalSecret's secretKeys, as ESO's template data
// is). mergePolicy Replace (ESO's default) keeps only the templated keys;
// Merge keeps the data keys too, the templates winning.
func esoTemplate(is issues, c *conversion, path string, tmpl map[string]any) {
	if tmpl == nil {
		return
	}
	if v := str(is, path, tmpl, "engineVersion"); v != "" && v != "v2" {
		is.unsupported(path+".engineVersion", "%q: keymount's templates are engine v2's (Go text/template with sprig-like functions)", v)
		return
	}
	if from, ok := tmpl["templateFrom"].([]any); ok && len(from) > 0 {
		is.unsupported(path+".templateFrom", "templates read from ConfigMaps or Secrets; copy each template into spec.target.template.data")
	}
	data, _ := tmpl["data"].(map[string]any)
	if len(data) == 0 {
		return
	}
	merge := false
	switch p := str(is, path, tmpl, "mergePolicy"); p {
	case "", "Replace":
	case "Merge":
		merge = true
	default:
		is.invalid(path+".mergePolicy", "%q is not Replace or Merge", p)
		return
	}
	if len(c.keys) == 0 {
		is.unsupported(path+".data", "templates without any spec.data value; keymount renders templates over the values of spec.data")
		return
	}
	source := c.keys[0].sourcePath
	kept := c.keys
	if !merge {
		kept = nil
	}
	c.keys = nil
	for _, k := range kept {
		if _, templated := data[k.targetKey]; !templated {
			c.keys = append(c.keys, k)
		}
	}
	for _, key := range sortedKeys(data) {
		kpath := path + ".data." + key
		text := str(is, path+".data", data, key)
		if !templateKey(is, kpath, c, key, text) {
			continue
		}
		c.keys = append(c.keys, secretKey{targetKey: key, sourcePath: source})
	}
}

// templateKey checks one templated key and records its annotation.
func templateKey(is issues, path string, c *conversion, key, text string) bool {
	if !validKey(key) {
		is.unsupported(path, "the key %q is not one a SecretSync accepts (letters, digits, '-', '.', '_' not at either end)", key)
		return false
	}
	name := AnnotationTemplatePrefix + key
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		is.unsupported(path, "the annotation %s is not a valid annotation name: %s", name, errs[0])
		return false
	}
	if err := checkTemplate(name, text); err != nil {
		is.invalid(path, "%v", err)
		return false
	}
	if c.syncAnnotations == nil {
		c.syncAnnotations = map[string]string{}
	}
	c.syncAnnotations[name] = text
	return true
}
