package convert

import (
	"regexp"
	"strings"

	"github.com/keymount/keymount/provider/aws/spec"
)

// Fields of a store's spec.provider.aws that keymount convert reads.
var esoAWSFields = []string{"service", "region", "role", "prefix", "auth", "additionalRoles", "externalID",
	"sessionTags", "transitiveTagKeys", "secretsManager"}

// esoStoreInfo is what the ExternalSecret's store says about its values.
type esoStoreInfo struct {
	service spec.ObjectType
	region  string
	prefix  string
	// serviceAccount is jwt.serviceAccountRef's name ("" without jwt), or
	// a Vault store's auth.kubernetes.serviceAccountRef's.
	serviceAccount string
	// vault is set for a Vault store.
	vault *esoVault
	// name is the store's; role its spec.provider.aws.role (the role External
	// Secrets assumed); staticKeys: its auth is secretRef.
	name       string
	role       string
	staticKeys bool
}

// esoStore resolves the store reference ref (at path: an ExternalSecret's
// spec.secretStoreRef, a PushSecret's spec.secretStoreRefs[i]) in the input
// and reads the store.
func (cv *converter) esoStore(is issues, path, namespace string, ref map[string]any, cluster bool) *esoStoreInfo {
	name := str(is, path, ref, "name")
	kind := str(is, path, ref, "kind")
	if kind == "" {
		kind = "SecretStore"
	}
	if name == "" {
		is.invalid(path+".name", "is required")
		return nil
	}
	key := storeKey(kind, namespace, name)
	d, ok := cv.stores[key]
	if !ok {
		is.invalid(path, "%s %s is not in the input; pass its manifest too (-f store.yaml)", kind, key[len(kind)+1:])
		return nil
	}
	if kind == "ClusterSecretStore" && !cluster && !storeAllows(is, path, d, namespace) {
		return nil
	}
	sis := cv.issuesFor(kind + " " + key[len(kind)+1:])
	before := sis.count()
	st := cv.readESOStore(sis, d, namespace, cv.opts.RoleARN != "")
	if st == nil {
		is.unsupported(path, "its %s cannot be converted (above)", kind)
		return nil
	}
	if sis.count() > before {
		is.unsupported(path, "its %s has fields keymount cannot express (above)", kind)
	}
	st.name = name
	return st
}

// storeKey is "<kind>/<namespace>/<name>", or "<kind>/<name>" for a
// ClusterSecretStore.
func storeKey(kind, namespace, name string) string {
	if kind == "ClusterSecretStore" {
		return kind + "/" + name
	}
	return kind + "/" + objectName(namespace, name)
}

// readESOStore reads spec.provider.aws (or .vault) of a SecretStore or
// ClusterSecretStore. esNamespace is the ExternalSecret's namespace;
// central: --role-arn names the role of External Secrets' own
// ServiceAccount (a jwt serviceAccountRef of another namespace reads as it).
func (cv *converter) readESOStore(is issues, d *document, esNamespace string, central bool) *esoStoreInfo {
	storeSpec := field(d.fields, "spec")
	unknownFields(is, "spec", storeSpec, "provider", "conditions", "controller", "refreshInterval", "retrySettings")
	if v := str(is, "spec", storeSpec, "controller"); v != "" {
		is.note("spec.controller", "%q picks one of several External Secrets controllers; keymount-controller serves every SecretSync, so it has no meaning here", v)
	}
	if _, ok := storeSpec["refreshInterval"]; ok {
		is.note("spec.refreshInterval", "not needed: External Secrets re-validates the store this often; keymount checks the store's access at every sync, and its status says when it fails")
	}
	if rs := field(storeSpec, "retrySettings"); rs != nil {
		unknownFields(is, "spec.retrySettings", rs, "maxRetries", "retryInterval")
		is.note("spec.retrySettings", "keymount's providers retry a failed call with their SDK's retryer (AWS: 3 attempts, exponential backoff) and keymount-controller retries a failed sync with its backoff; maxRetries and retryInterval are not applied")
	}
	provider := field(storeSpec, "provider")
	const path = "spec.provider"
	aws := field(provider, "aws")
	for _, k := range sortedKeys(provider) {
		if k != "aws" && k != "vault" {
			is.unsupported(path+"."+k, "keymount converts the aws provider (Secrets Manager and Parameter Store) and the vault provider (KV) only")
		}
	}
	if v := field(provider, "vault"); v != nil {
		st := &esoStoreInfo{}
		ca := caSource{storeKind: d.kind, storeNamespace: str(cv.noIssues(), "", field(d.fields, "metadata"), "namespace"), find: cv.inputObject}
		st.vault, st.serviceAccount = readESOVault(is, v, esNamespace, ca)
		if st.vault.params["vaultAddress"] == "" || st.vault.params["roleName"] == "" {
			return nil // reported: no server, or no Kubernetes auth role
		}
		return st
	}
	if aws == nil {
		return nil
	}
	apath := path + ".aws"
	unknownFields(is, apath, aws, esoAWSFields...)
	st := &esoStoreInfo{region: str(is, apath, aws, "region"), prefix: str(is, apath, aws, "prefix")}
	switch svc := str(is, apath, aws, "service"); svc {
	case "SecretsManager":
		st.service = spec.SecretsManager
	case "ParameterStore":
		st.service = spec.SSMParameter
	default:
		is.unsupported(apath+".service", "%q: keymount reads SecretsManager and ParameterStore", svc)
		return nil
	}
	// role: keymount reads as that role directly (identity.go).
	st.role = str(is, apath, aws, "role")
	for _, k := range []string{"additionalRoles", "externalID", "sessionTags", "transitiveTagKeys"} {
		if _, ok := aws[k]; ok {
			is.unsupported(apath+"."+k, "keymount does not chain roles: it reads as the ServiceAccount's own IRSA role")
		}
	}
	st.serviceAccount = esoAuth(is, apath+".auth", field(aws, "auth"), esNamespace, central)
	_, st.staticKeys = field(aws, "auth")["secretRef"]
	return st
}

// esoAuth returns the ServiceAccount of jwt auth in the ExternalSecret's
// namespace, "" (reported) for any other auth.
func esoAuth(is issues, path string, auth map[string]any, esNamespace string, central bool) string {
	unknownFields(is, path, auth, "jwt", "secretRef")
	if _, ok := auth["secretRef"]; ok {
		is.unsupported(path+".secretRef", "static access keys; keymount reads as a ServiceAccount with IRSA or Pod Identity: give the ServiceAccount a role and pass --service-account NAME")
		return ""
	}
	jwt := field(auth, "jwt")
	if jwt == nil {
		return ""
	}
	jpath := path + ".jwt.serviceAccountRef"
	ref := field(jwt, "serviceAccountRef")
	unknownFields(is, path+".jwt", jwt, "serviceAccountRef")
	unknownFields(is, jpath, ref, "name", "namespace", "audiences")
	name := str(is, jpath, ref, "name")
	if ns := str(is, jpath, ref, "namespace"); ns != "" && ns != esNamespace {
		if central {
			return "" // External Secrets' own ServiceAccount: read as --role-arn (identity.go)
		}
		is.unsupported(jpath+".namespace", "%q: a SecretSync reads as a ServiceAccount of its own namespace (%q); pass --role-arn ARN (that ServiceAccount's role: convert writes one with it) or give a ServiceAccount there the role and pass --service-account NAME", ns, esNamespace)
		return ""
	}
	// sts.amazonaws.com is the audience IRSA's tokens have, which
	// keymount-controller requests for the AWS provider: the same token.
	for _, a := range items2(ref, "audiences") {
		if a != irsaAudience {
			is.unsupported(jpath+".audiences", "%q: keymount-controller requests tokens for the audiences it is configured with (--token-request-audience; %s for IRSA)", a, irsaAudience)
			break
		}
	}
	return name
}

// irsaAudience is the audience of IRSA's service account tokens.
const irsaAudience = "sts.amazonaws.com"

// storeAllows reads a ClusterSecretStore's spec.conditions, which say which
// namespaces External Secrets lets use it, for the ExternalSecret's
// namespace: a condition matches by namespaces or namespaceRegexes. A
// namespaceSelector needs the namespace's labels, which are not in the
// input: it is refused, never guessed, so a conversion never gives a
// namespace the store's identity that External Secrets would have denied.
func storeAllows(is issues, path string, d *document, namespace string) bool {
	ok, selector := storeAdmits(d, namespace)
	switch {
	case ok:
		return true
	case selector != "":
		is.unsupported(path, "%s: the namespaces' labels are not in the input, so keymount convert cannot tell whether External Secrets lets namespace %q use this store; name the namespace in the condition's namespaces or namespaceRegexes", selector, namespace)
	default:
		is.unsupported(path, "the ClusterSecretStore's spec.conditions do not let namespace %q use it, so External Secrets would refuse this %s", namespace, objectKind(is.object))
	}
	return false
}

// storeAdmits reports whether the ClusterSecretStore d's spec.conditions
// (none: every namespace) admit namespace by name or regular expression;
// when they do not, selector is the path of a namespaceSelector that
// might (the input has no labels to tell), "" if there is none.
func storeAdmits(d *document, namespace string) (ok bool, selector string) {
	conds := items(field(d.fields, "spec"), "conditions")
	if len(conds) == 0 {
		return true, ""
	}
	for i, c := range conds {
		for _, n := range items2(c, "namespaces") {
			if n == namespace {
				return true, ""
			}
		}
		for _, r := range items2(c, "namespaceRegexes") {
			if re, err := regexp.Compile(r); err == nil && re.MatchString(namespace) {
				return true, ""
			}
		}
		if _, ok := c["namespaceSelector"]; ok && selector == "" {
			selector = index("the ClusterSecretStore's spec.conditions", i) + ".namespaceSelector"
		}
	}
	return false, selector
}

// objectKind is the kind that starts an issue's object ("ExternalSecret
// team-a/db").
func objectKind(object string) string {
	kind, _, _ := strings.Cut(object, " ")
	return kind
}

// items2 returns the strings of the list at key of m.
func items2(m map[string]any, key string) []string {
	list, _ := m[key].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
