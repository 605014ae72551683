package template

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// sprigAllowed are the sprig functions a template may call, by family. Left
// out on purpose: env and expandenv (environment), getHostByName (network),
// now, ago, date and the other date functions (clock, time zone files),
// randAlpha, randAlphaNum, randAscii, randNumeric, randBytes, randInt, uuidv4,
// shuffle, bcrypt, htpasswd, encryptAES, genPrivateKey, genCA*,
// genSelfSignedCert*, genSignedCert*, buildCustomCert (random), derivePassword
// (deliberately slow), decryptAES, the os* path functions and hello.
var sprigAllowed = map[string][]string{
	"strings": {
		"abbrev", "abbrevboth", "trunc", "trim", "upper", "lower", "title", "untitle", "substr",
		"trimAll", "trimall", "trimSuffix", "trimPrefix", "nospace", "initials", "swapcase",
		"snakecase", "camelcase", "kebabcase", "wrap", "contains", "hasPrefix", "hasSuffix",
		"quote", "squote", "cat", "plural", "toString", "toStrings", "split", "splitList", "splitn",
		"sortAlpha", "atoi", "regexMatch", "mustRegexMatch", "regexFindAll", "mustRegexFindAll",
		"regexFind", "mustRegexFind", "regexSplit", "mustRegexSplit", "regexQuoteMeta",
	},
	"encoding": {
		"b64enc", "b32enc", "toJson", "mustToJson", "toPrettyJson", "mustToPrettyJson",
		"toRawJson", "mustToRawJson", "mustFromJson", "sha1sum", "sha256sum", "sha512sum",
		"adler32sum", "urlParse", "urlJoin",
	},
	"lists": {
		"list", "tuple", "append", "push", "mustAppend", "mustPush", "prepend", "mustPrepend",
		"first", "mustFirst", "rest", "mustRest", "last", "mustLast", "initial", "mustInitial",
		"reverse", "mustReverse", "uniq", "mustUniq", "without", "mustWithout", "has", "mustHas",
		"slice", "mustSlice", "concat", "compact", "mustCompact", "chunk", "mustChunk",
	},
	"dicts": {
		"dict", "get", "set", "unset", "hasKey", "pluck", "keys", "pick", "omit", "merge",
		"mergeOverwrite", "mustMerge", "mustMergeOverwrite", "values", "dig", "deepCopy",
		"mustDeepCopy",
	},
	"math": {
		"add", "add1", "sub", "div", "mod", "mul", "max", "min", "biggest", "addf", "add1f",
		"subf", "divf", "mulf", "maxf", "minf", "ceil", "floor", "round", "int", "int64",
		"float64", "toDecimal",
	},
	"flow": {
		"default", "empty", "coalesce", "all", "any", "ternary", "typeOf", "typeIs",
		"typeIsLike", "kindOf", "kindIs", "deepEqual", "semver", "semverCompare",
		"base", "dir", "clean", "ext", "isAbs",
	},
}

// keymountFuncs are keymount's own functions: sprig functions whose argument
// can multiply their output, bounded here; decoders that fail instead of
// returning an error text; fail, whose message is shown only when the
// template spells it; YAML; and External Secrets' PEM, PKCS#12 and JWK
// helpers (pem.go).
var keymountFuncs = map[string]any{
	// Bounded versions of sprig's and text/template's.
	"repeat":                     repeat,
	"replace":                    replace,
	"indent":                     indent,
	"nindent":                    nindent,
	"join":                       join,
	"wrapWith":                   wrapWith,
	"until":                      until,
	"untilStep":                  untilStep,
	"seq":                        seq,
	"regexReplaceAll":            regexReplaceAll,
	"mustRegexReplaceAll":        regexReplaceAll,
	"regexReplaceAllLiteral":     regexReplaceAllLiteral,
	"mustRegexReplaceAllLiteral": regexReplaceAllLiteral,
	"printf":                     printf,
	"print":                      fmt.Sprint,
	"println":                    fmt.Sprintln,
	"index":                      index,
	"fail":                       fail,
	// Decoders that fail on bad input (sprig's return the error's text).
	"b64dec":   b64dec,
	"b32dec":   b32dec,
	"fromJson": fromJSON,
	"toYaml":   toYAML,
	"fromYaml": fromYAML,
	// External Secrets' helpers.
	"pkcs12key":           pkcs12key,
	"pkcs12keyPass":       pkcs12keyPass,
	"pkcs12cert":          pkcs12cert,
	"pkcs12certPass":      pkcs12certPass,
	"pemToPkcs12":         pemToPkcs12,
	"pemToPkcs12Pass":     pemToPkcs12Pass,
	"fullPemToPkcs12":     fullPemToPkcs12,
	"fullPemToPkcs12Pass": fullPemToPkcs12Pass,
	"filterPEM":           filterPEM,
	"filterCertChain":     filterCertChain,
	"jwkPublicKeyPem":     jwkPublicKeyPem,
	"jwkPrivateKeyPem":    jwkPrivateKeyPem,
}

// functions is the whole function set, unwrapped.
var functions = buildFunctions()

func buildFunctions() map[string]any {
	all := sprig.GenericFuncMap()
	fm := make(map[string]any)
	for _, names := range sprigAllowed {
		for _, name := range names {
			fn, ok := all[name]
			if !ok {
				panic(fmt.Sprintf("template: sprig has no function %q", name))
			}
			fm[name] = fn
		}
	}
	maps.Copy(fm, keymountFuncs)
	return fm
}

// Functions returns the names of every function a template may call, sorted
// (text/template's own and, or, not, len, eq, ne, lt, le, gt, ge,
// html, js, urlquery and call come on top).
func Functions() []string {
	return slices.Sorted(maps.Keys(functions))
}

// fail fails the render with msg (sprig's), shown only when the template's
// text spells it: {{ fail "db needs a host" }} shows it, {{ .password |
// fail }} does not (errors.go).
func fail(msg string) (string, error) {
	return "", safeErrorf("%q", msg)
}

func b64dec(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("b64dec: %w", err)
	}
	return string(b), nil
}

func b32dec(s string) (string, error) {
	b, err := base32.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("b32dec: %w", err)
	}
	return string(b), nil
}

func fromJSON(s string) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("fromJson: %w", err)
	}
	return v, nil
}

// toYAML renders v as YAML without the trailing newline (as Helm's and
// External Secrets' toYaml).
func toYAML(v any) (string, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

func fromYAML(s string) (any, error) {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("fromYaml: %w", err)
	}
	return v, nil
}
