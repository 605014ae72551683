package convert

import (
	"fmt"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

// checkTemplate parses a converted template with the functions of ESO's
// engine v2 known by name, so that a syntax error or an unknown function
// is reported by the conversion, naming the annotation.
func checkTemplate(name, text string) error {
	if _, err := template.New(name).Funcs(templateFuncs()).Parse(text); err != nil {
		return fmt.Errorf("the template does not parse: %w", err)
	}
	return nil
}

// esoHelpers are ESO's own template functions, besides sprig's.
var esoHelpers = []string{
	"pkcs12key", "pkcs12keyPass", "pkcs12cert", "pkcs12certPass",
	"pemToPkcs12", "pemToPkcs12Pass", "fullPemToPkcs12", "fullPemToPkcs12Pass",
	"filterPEM", "filterCertChain", "jwkPublicKeyPem", "jwkPrivateKeyPem",
	"toYaml", "fromYaml",
}

// templateFuncs are the names a template may call: sprig's without
// env, expandenv and getHostByName, and ESO's helpers. Parsing only needs
// the names.
func templateFuncs() template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, n := range []string{"env", "expandenv", "getHostByName"} {
		delete(fm, n)
	}
	for _, n := range esoHelpers {
		fm[n] = func(...any) (string, error) { return "", nil }
	}
	return fm
}
