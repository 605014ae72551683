package convert

import (
	"fmt"
	"slices"
	"strings"

	"github.com/keymount/keymount/provider/aws/spec"
)

// annotationDataFrom is the SecretSync annotation that lists the provider
// directories whose every file is a Secret key (keymount-controller's
// SecretSync reconciler reads it).
const annotationDataFrom = "keymount.io/data-from"

// Fields of an ESO dataFrom entry and of its extract and find.
var (
	esoDataFromFields = []string{"extract", "find", "rewrite", "sourceRef"}
	esoExtractFields  = []string{"key", "property", "version", "conversionStrategy", "decodingStrategy", "metadataPolicy", "nullBytePolicy"}
	esoFindFields     = []string{"path", "name", "tags", "conversionStrategy", "decodingStrategy"}
)

// esoDataFrom converts one spec.dataFrom entry of an AWS store: extract
// becomes an object with keymount's extract, find an object with keymount's
// find; either writes its keys as files under a directory of its own, which
// the SecretSync's keymount.io/data-from annotation lists.
func (cv *converter) esoDataFromEntry(is issues, c *conversion, st *esoStoreInfo, path string, e map[string]any) {
	unknownFields(is, path, e, esoDataFromFields...)
	if _, ok := e["sourceRef"]; ok {
		is.unsupported(path+".sourceRef", "a per-entry store or generator; keymount reads every key of a SecretSync through its one class")
		return
	}
	ext, find := field(e, "extract"), field(e, "find")
	if (ext == nil) == (find == nil) {
		is.invalid(path, "needs exactly one of extract and find")
		return
	}
	rewrite, ok := esoRewrite(is, path+".rewrite", e)
	if !ok {
		return
	}
	if st.vault != nil {
		if find != nil {
			is.unsupported(path+".find", "a search of a Vault store: keymount's Vault provider reads the paths a class names and lists none; extract each secret (dataFrom[].extract)")
			return
		}
		c.esoVaultExtract(is, st.vault, path+".extract", ext, rewrite)
		return
	}
	o := &awsObject{Type: st.service, Alias: c.dataFromDir()}
	if ext != nil {
		o.Extract, ok = esoExtract(is, path+".extract", ext, rewrite)
		if !ok {
			return
		}
		r := storeRef{typ: st.service, name: st.prefix + str(is, path+".extract", ext, "key")}
		remoteVersion(&r, str(is, path+".extract", ext, "version"))
		o.Name, o.Version, o.VersionLabel = r.name, r.version, r.versionLabel
	} else if o.Find, ok = esoFind(is, path+".find", find, st, rewrite); !ok {
		return
	}
	c.objects = append(c.objects, o)
	c.keys = append(c.keys, secretKey{targetKey: o.Alias, sourcePath: o.Alias})
	c.dataFrom = append(c.dataFrom, o.Alias)
}

// dataFromDir is a directory name for the next dataFrom entry that no key
// or other file of the conversion uses.
func (c *conversion) dataFromDir() string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("datafrom-%d", i)
		if !slices.ContainsFunc(c.keys, func(k secretKey) bool { return k.targetKey == name || k.sourcePath == name }) &&
			!slices.ContainsFunc(c.objects, func(o *awsObject) bool { return o.Alias == name }) {
			return name
		}
	}
}

// esoRewrite reads a dataFrom entry's rewrite list: regexp rewrites only.
func esoRewrite(is issues, path string, e map[string]any) ([]awsRewrite, bool) {
	var out []awsRewrite
	ok := true
	for i, r := range items(e, "rewrite") {
		at := index(path, i)
		unknownFields(is, at, r, "regexp", "transform", "merge")
		re := field(r, "regexp")
		switch {
		case r["transform"] != nil:
			is.unsupported(at+".transform", "keymount rewrites keys by regular expression only; write the rewrite as regexp: {source, target}")
			ok = false
		case r["merge"] != nil:
			is.unsupported(at+".merge", "keymount does not merge found values into one another; extract each value instead")
			ok = false
		case re == nil:
			is.invalid(at, "needs regexp: {source, target}")
			ok = false
		default:
			unknownFields(is, at+".regexp", re, "source", "target")
			out = append(out, awsRewrite{Regexp: awsRegexp{Source: str(is, at+".regexp", re, "source"), Target: str(is, at+".regexp", re, "target")}})
		}
	}
	return out, ok
}

// esoExtract reads dataFrom[].extract's options.
func esoExtract(is issues, path string, ext map[string]any, rewrite []awsRewrite) (*awsExtract, bool) {
	unknownFields(is, path, ext, esoExtractFields...)
	if str(is, path, ext, "key") == "" {
		is.invalid(path+".key", "is required")
		return nil, false
	}
	if str(is, path, ext, "property") != "" {
		is.unsupported(path+".property", "extracting the fields of one property of a JSON value; extract the whole value, or list each field in spec.data with remoteRef.property")
		return nil, false
	}
	ok := esoKeyPolicies(is, path, ext)
	return &awsExtract{
		ConversionStrategy: str(is, path, ext, "conversionStrategy"),
		DecodingStrategy:   str(is, path, ext, "decodingStrategy"),
		Rewrite:            rewrite,
	}, ok
}

// esoKeyPolicies refuses metadataPolicy and nullBytePolicy other than their
// defaults.
func esoKeyPolicies(is issues, path string, m map[string]any) bool {
	ok := true
	if v := str(is, path, m, "metadataPolicy"); v != "" && v != "None" {
		is.unsupported(path+".metadataPolicy", "%q: keymount reads secret values, not their metadata", v)
		ok = false
	}
	if v := str(is, path, m, "nullBytePolicy"); v != "" && v != "Ignore" {
		is.unsupported(path+".nullBytePolicy", "%q: keymount writes values with NUL bytes as they are", v)
		ok = false
	}
	return ok
}

// awsExtract is keymount's extract of an object, as the class writes it.
type awsExtract struct {
	ConversionStrategy string       `yaml:"conversionStrategy,omitempty"`
	DecodingStrategy   string       `yaml:"decodingStrategy,omitempty"`
	Rewrite            []awsRewrite `yaml:"rewrite,omitempty"`
}

// awsRewrite is one regexp rewrite of keys.
type awsRewrite struct {
	Regexp awsRegexp `yaml:"regexp"`
}

type awsRegexp struct {
	Source string `yaml:"source"`
	Target string `yaml:"target"`
}

// awsFind is keymount's find of an object, as the class writes it.
type awsFind struct {
	Path               string            `yaml:"path,omitempty"`
	Name               *awsFindName      `yaml:"name,omitempty"`
	Tags               map[string]string `yaml:"tags,omitempty"`
	ConversionStrategy string            `yaml:"conversionStrategy,omitempty"`
	DecodingStrategy   string            `yaml:"decodingStrategy,omitempty"`
	Rewrite            []awsRewrite      `yaml:"rewrite,omitempty"`
}

type awsFindName struct {
	Regexp string `yaml:"regexp"`
}

// esoFind reads dataFrom[].find. The store's prefix (Parameter Store's
// `prefix`) is put before the path, as ESO reads names under it.
func esoFind(is issues, path string, f map[string]any, st *esoStoreInfo, rewrite []awsRewrite) (*awsFind, bool) {
	unknownFields(is, path, f, esoFindFields...)
	out := &awsFind{
		Path:               str(is, path, f, "path"),
		Tags:               strMap(is, path, f, "tags"),
		ConversionStrategy: str(is, path, f, "conversionStrategy"),
		DecodingStrategy:   str(is, path, f, "decodingStrategy"),
		Rewrite:            rewrite,
	}
	if n := field(f, "name"); n != nil {
		unknownFields(is, path+".name", n, "regexp")
		if re := str(is, path+".name", n, "regexp"); re != "" {
			out.Name = &awsFindName{Regexp: re}
		}
	}
	if st.prefix != "" {
		out.Path = st.prefix + strings.TrimPrefix(out.Path, "/")
	}
	if st.service == spec.SSMParameter && out.Path == "" {
		// ESO searches every parameter of the account by name; keymount
		// reads a path.
		is.unsupported(path+".path", "a Parameter Store find without a path: keymount reads parameters by path; set find.path (the root \"/\" reads every parameter)")
		return nil, false
	}
	return out, true
}
