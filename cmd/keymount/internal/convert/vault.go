package convert

import (
	"crypto/x509"
	"encoding/base64"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Fields of a store's spec.provider.vault that keymount convert reads.
var (
	esoVaultFields   = []string{"server", "path", "version", "namespace", "auth", "caBundle", "caProvider", "tls", "readYourWrites", "forwardInconsistent", "headers"}
	esoVaultAuths    = []string{"kubernetes", "tokenSecretRef", "appRole", "ldap", "jwt", "cert", "iam", "userPass", "gcp"}
	esoVaultK8sAuths = []string{"mountPath", "role", "serviceAccountRef", "secretRef"}
)

// vaultObject is one entry of a vault class's objects parameter, as
// vault-csi-provider (and keymount's Vault provider) read it.
type vaultObject struct {
	Name      string      `yaml:"objectName"`
	Path      string      `yaml:"secretPath"`
	SecretKey string      `yaml:"secretKey,omitempty"`
	Extract   *awsExtract `yaml:"extract,omitempty"`
}

// esoVault is what a store's spec.provider.vault says: the class's
// parameters but objects, and how to build a secretPath.
type esoVault struct {
	params map[string]string
	// mount is spec.provider.vault.path, the KV engine's mount.
	mount string
	// v1: a KV version 1 engine (version: v1).
	v1 bool
}

// readESOVault reads spec.provider.vault of a SecretStore or
// ClusterSecretStore into the class parameters of keymount's Vault provider
// (vault-csi-provider's): server → vaultAddress, auth.kubernetes.role →
// roleName, mountPath → vaultKubernetesMountPath, namespace →
// vaultNamespace. It returns the ServiceAccount of the login too.
func readESOVault(is issues, vault map[string]any, esNamespace string, ca caSource) (*esoVault, string) {
	const vpath = "spec.provider.vault"
	unknownFields(is, vpath, vault, esoVaultFields...)
	v := &esoVault{params: map[string]string{}, mount: strings.Trim(str(is, vpath, vault, "path"), "/")}
	v.params["vaultAddress"] = str(is, vpath, vault, "server")
	if v.params["vaultAddress"] == "" {
		is.invalid(vpath+".server", "is required")
	}
	if ns := str(is, vpath, vault, "namespace"); ns != "" {
		v.params["vaultNamespace"] = ns
	}
	switch ver := str(is, vpath, vault, "version"); ver {
	case "", "v2":
	case "v1":
		v.v1 = true
	default:
		is.invalid(vpath+".version", "%q is not v1 or v2", ver)
	}
	if v.mount == "" {
		is.unsupported(vpath+".path", "no KV mount: keymount's classes name each secret by its full API path; give the mount (e.g. secret)")
	}
	if b := str(is, vpath, vault, "caBundle"); b != "" {
		esoCABundle(is, vpath+".caBundle", b, v.params)
	}
	if cp := field(vault, "caProvider"); cp != nil {
		esoCAProvider(is, vpath+".caProvider", cp, ca, v.params)
	}
	if _, ok := vault["tls"]; ok {
		is.unsupported(vpath+".tls", "a client certificate and key read from Secrets: keymount's Vault provider reads them from files (vaultTLSClientCertPath, vaultTLSClientKeyPath); mount the Secret into the provider (providers.vault.volumes) and set both by hand, since a key never goes into a class")
	}
	for _, k := range []string{"readYourWrites", "forwardInconsistent", "headers"} {
		if _, ok := vault[k]; ok {
			is.unsupported(vpath+"."+k, "keymount's Vault provider has no such setting")
		}
	}
	sa := esoVaultAuth(is, vpath+".auth", field(vault, "auth"), esNamespace, v.params)
	return v, sa
}

// esoVaultAuth reads auth.kubernetes into roleName and
// vaultKubernetesMountPath and returns serviceAccountRef's name; any other
// login is reported.
func esoVaultAuth(is issues, apath string, auth map[string]any, esNamespace string, params map[string]string) string {
	unknownFields(is, apath, auth, esoVaultAuths...)
	for _, k := range sortedKeys(auth) {
		if k != "kubernetes" {
			is.unsupported(apath+"."+k, "keymount logs in to Vault as the SecretSync's ServiceAccount with Kubernetes auth only (a token kubelet or keymount-controller requests); give a Vault role to a ServiceAccount and use auth.kubernetes")
		}
	}
	k8s := field(auth, "kubernetes")
	if k8s == nil {
		if len(auth) == 0 {
			is.unsupported(apath, "no login: keymount logs in to Vault with auth.kubernetes (role and serviceAccountRef)")
		}
		return ""
	}
	kpath := apath + ".kubernetes"
	unknownFields(is, kpath, k8s, esoVaultK8sAuths...)
	params["roleName"] = str(is, kpath, k8s, "role")
	if params["roleName"] == "" {
		is.invalid(kpath+".role", "is required")
	}
	mount := strings.Trim(str(is, kpath, k8s, "mountPath"), "/")
	if mount != "" && mount != "kubernetes" {
		params["vaultKubernetesMountPath"] = mount
	}
	if _, ok := k8s["secretRef"]; ok {
		is.unsupported(kpath+".secretRef", "a long-lived service account token Secret; keymount logs in with a short-lived token of serviceAccountRef's ServiceAccount")
	}
	ref := field(k8s, "serviceAccountRef")
	rpath := kpath + ".serviceAccountRef"
	unknownFields(is, rpath, ref, "name", "namespace", "audiences")
	if ns := str(is, rpath, ref, "namespace"); ns != "" && ns != esNamespace {
		is.unsupported(rpath+".namespace", "%q: a SecretSync reads as a ServiceAccount of its own namespace (%q); bind a ServiceAccount there to the Vault role and pass --service-account NAME", ns, esNamespace)
		return ""
	}
	if a, ok := ref["audiences"].([]any); ok && len(a) > 0 {
		first, _ := a[0].(string)
		if len(a) > 1 || first == "" {
			is.unsupported(rpath+".audiences", "keymount's Vault provider logs in with a token of one audience (the class's audience parameter)")
		} else if first != "vault" {
			params["audience"] = first
			is.note(rpath+".audiences", "%q: keymount-controller must request tokens for it too (--token-request-audience, or controller.tokenRequestAudiences in the chart)", first)
		}
	}
	return str(is, rpath, ref, "name")
}

// secretPath is the API path of the store's secret key: <mount>/data/<key>
// for KV version 2 (with ?version=N for a pinned version),
// <mount>/<key> for version 1. A key that starts with the mount is taken
// as a full path, as ESO does.
func (v *esoVault) secretPath(key, version string) string {
	key = strings.Trim(key, "/")
	if v.mount != "" && strings.HasPrefix(key, v.mount+"/") {
		key = strings.TrimPrefix(key, v.mount+"/")
	}
	if v.v1 {
		return path.Join(v.mount, key)
	}
	p := path.Join(v.mount, "data", key)
	if version != "" {
		p += "?version=" + version
	}
	return p
}

// esoVaultData converts one spec.data entry of a Vault store: a field of a
// KV secret becomes an object of the class and a key of the Secret.
func (cv *converter) esoVaultData(is issues, c *conversion, v *esoVault, rpath, key string, ref map[string]any) bool {
	remote := str(is, rpath, ref, "key")
	prop := str(is, rpath, ref, "property")
	version := str(is, rpath, ref, "version")
	switch {
	case prop == "":
		is.unsupported(rpath+".property", "the whole secret as JSON: keymount's Vault provider reads one field per object (secretKey); list each field with remoteRef.property")
		return false
	case strings.ContainsAny(prop, `.*?#|@\!=<>%`):
		is.unsupported(rpath+".property", "%q: a gjson path; a class reads top-level fields only (secretKey)", prop)
		return false
	case version != "" && (v.v1 || !isDigits(version)):
		is.unsupported(rpath+".version", "%q: only a KV version 2 version number can be pinned", version)
		return false
	}
	c.vaultObjects = append(c.vaultObjects, &vaultObject{Name: key, Path: v.secretPath(remote, version), SecretKey: prop})
	return true
}

// esoVaultExtract converts a dataFrom entry's extract of a Vault store: an
// object with keymount's extract, every field of the secret's data a file
// under a directory the SecretSync's keymount.io/data-from lists.
func (c *conversion) esoVaultExtract(is issues, v *esoVault, path string, ext map[string]any, rewrite []awsRewrite) {
	opts, ok := esoExtract(is, path, ext, rewrite)
	if !ok {
		return
	}
	version := str(is, path, ext, "version")
	if version != "" && (v.v1 || !isDigits(version)) {
		is.unsupported(path+".version", "%q: only a KV version 2 version number can be pinned", version)
		return
	}
	dir := c.dataFromDir()
	c.vaultObjects = append(c.vaultObjects, &vaultObject{Name: dir, Path: v.secretPath(str(is, path, ext, "key"), version), Extract: opts})
	c.keys = append(c.keys, secretKey{targetKey: dir, sourcePath: dir})
	c.dataFrom = append(c.dataFrom, dir)
}

// vaultParameters are the class's spec.parameters of a Vault conversion.
func (c *conversion) vaultParameters() (map[string]string, error) {
	objects, err := yaml.Marshal(c.vaultObjects)
	if err != nil {
		return nil, err
	}
	p := map[string]string{"objects": string(objects)}
	for k, v := range c.vaultParams {
		if v != "" {
			p[k] = v
		}
	}
	return p, nil
}

// caSource finds a v1 ConfigMap or Secret of the input by kind, namespace
// and name (nil when it is not there).
type caSource struct {
	// storeKind and storeNamespace are the store's: a SecretStore's
	// caProvider is in its own namespace, a ClusterSecretStore's names one.
	storeKind, storeNamespace string
	find                      func(kind, namespace, name string) *document
}

// esoCAProvider maps a Vault store's caProvider (a key of a ConfigMap or
// Secret holding the CA's PEM text) to the class's vaultCACertPEM, with the
// caBundle's certificates when both are set (External Secrets trusts
// both). The ConfigMap or Secret must be in the input: keymount convert
// never reads the cluster.
func esoCAProvider(is issues, path string, cp map[string]any, ca caSource, params map[string]string) {
	unknownFields(is, path, cp, "type", "name", "key", "namespace")
	kind, name, key, ns := str(is, path, cp, "type"), str(is, path, cp, "name"), str(is, path, cp, "key"), str(is, path, cp, "namespace")
	switch {
	case kind != "Secret" && kind != "ConfigMap":
		is.invalid(path+".type", "%q is not Secret or ConfigMap", kind)
		return
	case name == "":
		is.invalid(path+".name", "is required")
		return
	case key == "":
		is.invalid(path+".key", "is required")
		return
	case ca.storeKind == "ClusterSecretStore" && ns == "":
		is.invalid(path+".namespace", "is required in a ClusterSecretStore")
		return
	case ca.storeKind != "ClusterSecretStore" && ns != "" && ns != ca.storeNamespace:
		is.invalid(path+".namespace", "a SecretStore reads its CA from its own namespace %q, not %q; leave it out", ca.storeNamespace, ns)
		return
	}
	if ns == "" {
		ns = ca.storeNamespace
	}
	d := ca.find(kind, ns, name)
	if d == nil {
		is.invalid(path, "the %s %s is not in the input: add its manifest (kubectl get %s -n %s %s -o yaml), whose %s becomes the class's vaultCACertPEM",
			kind, objectName(ns, name), strings.ToLower(kind), ns, name, key)
		return
	}
	pemText, ok := caValue(d, key)
	if !ok {
		is.invalid(path+".key", "the %s %s has no key %q", kind, objectName(ns, name), key)
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM([]byte(pemText)) {
		is.invalid(path+".key", "%s of the %s %s is not a PEM certificate bundle", key, kind, objectName(ns, name))
		return
	}
	if prev := params["vaultCACertPEM"]; prev != "" {
		pemText = strings.TrimRight(prev, "\n") + "\n" + pemText
	}
	params["vaultCACertPEM"] = pemText
}

// caValue is the text of key of a ConfigMap (data) or a Secret (data,
// base64; stringData).
func caValue(d *document, key string) (string, bool) {
	if d.kind == "ConfigMap" {
		v, ok := field(d.fields, "data")[key].(string)
		return v, ok
	}
	if v, ok := field(d.fields, "stringData")[key].(string); ok {
		return v, true
	}
	b64, ok := field(d.fields, "data")[key].(string)
	if !ok {
		return "", false
	}
	v, err := base64.StdEncoding.DecodeString(b64)
	return string(v), err == nil
}

// esoCABundle maps a Vault store's caBundle (base64 of a PEM bundle) to the
// class's vaultCACertPEM.
func esoCABundle(is issues, path, b64 string, params map[string]string) {
	pemText, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || !x509.NewCertPool().AppendCertsFromPEM(pemText) {
		is.invalid(path, "is not the base64 of a PEM certificate bundle")
		return
	}
	params["vaultCACertPEM"] = string(pemText)
}
