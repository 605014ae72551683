package convert

import (
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/keymount/keymount/internal/template"
)

// keymount's annotations the output carries.
const (
	annotationPolicy   = "keymount.io/rotation-policy"
	annotationInterval = "keymount.io/rotation-interval"
	// AnnotationTemplatePrefix starts the SecretSync annotation whose value
	// is the Go template of one Secret key: keymount.io/template.<key>.
	AnnotationTemplatePrefix = template.AnnotationPrefix
)

// Options are the choices of the command line.
type Options struct {
	// ServiceAccount is the SecretSync's serviceAccountName where the input
	// names none (KES; an ESO store without jwt auth).
	ServiceAccount string
	// RoleARN is the IAM role of External Secrets' controller: an AWS store
	// without auth or role, or whose jwt ServiceAccount is of another
	// namespace, reads as a ServiceAccount keymount-<store> written with it
	// (before ServiceAccount).
	RoleARN string
	// PodIdentity: the ServiceAccounts written read with EKS Pod Identity
	// (no IRSA annotation; their classes set usePodIdentity).
	PodIdentity bool
	// ClusterNamespace holds ClusterExternalSecrets' SecretSyncs
	// (DefaultClusterNamespace when empty).
	ClusterNamespace string
}

// Result is the outcome of a conversion.
type Result struct {
	// conversions in input order; those with issues included (a partial
	// output leaves out what the issues name).
	conversions []*conversion
	// Issues in input order, each once.
	Issues []Issue
}

// converted is the number of ExternalSecrets converted (fully or not).
func (r *Result) converted() int { return len(r.conversions) }

// converter holds one run.
type converter struct {
	opts   Options
	stores map[string]*document
	// objects are the input's v1 ConfigMaps and Secrets by
	// "<kind>/<namespace>/<name>": a Vault store's caProvider reads one.
	objects map[string]*document
	issues  []Issue
	dummy   []Issue
}

// Convert reads every ExternalSecret of the inputs (with the stores the
// inputs hold) and converts it. An error is an input that cannot be read at
// all; what cannot be expressed is in Result.Issues.
func Convert(inputs []Input, opts Options) (*Result, error) {
	docs, err := readDocuments(inputs)
	if err != nil {
		return nil, err
	}
	cv := &converter{opts: opts, stores: map[string]*document{}, objects: map[string]*document{}}
	for i := range docs {
		d := &docs[i]
		meta := field(d.fields, "metadata")
		ns, name := str(cv.noIssues(), "", meta, "namespace"), str(cv.noIssues(), "", meta, "name")
		switch {
		case isESO(d.apiVersion) && (d.kind == "SecretStore" || d.kind == "ClusterSecretStore"):
			cv.stores[storeKey(d.kind, ns, name)] = d
		case d.apiVersion == "v1" && (d.kind == "ConfigMap" || d.kind == "Secret"):
			cv.objects[d.kind+"/"+objectName(ns, name)] = d
		}
	}
	res := &Result{}
	for i := range docs {
		for _, c := range cv.convertDocument(&docs[i]) {
			cv.finish(c)
			res.conversions = append(res.conversions, c)
		}
	}
	cv.checkNames(res.conversions)
	cv.checkServiceAccounts(res.conversions)
	res.Issues = dedupe(cv.issues)
	return res, nil
}

// checkNames reports two ExternalSecrets that would write the same class or
// the same SecretSync (the same Secret); the later one is not written.
func (cv *converter) checkNames(list []*conversion) {
	classes, syncs, pushes := map[string]string{}, map[string]string{}, map[string]string{}
	for _, c := range list {
		if !c.writable {
			continue
		}
		is := cv.issuesFor(c.source)
		class, sync := objectName(c.namespace, c.className), objectName(c.namespace, c.syncName)
		if prev, ok := classes[class]; ok {
			is.unsupported("metadata.name", "the SecretProviderClass %s is also %s's; rename one %s", class, prev, objectKind(c.source))
			c.writable = false
		}
		if prev, ok := pushes[sync]; ok && c.push != nil {
			is.unsupported("metadata.name", "the PushSecret %s is also %s's; rename one PushSecret or store", sync, prev)
			c.writable = false
		}
		if prev, ok := syncs[sync]; ok && c.push == nil {
			is.unsupported("spec.target.name", "the Secret %s is also written by %s; a SecretSync writes the Secret of its own name, so two cannot share one (even with creationPolicy Merge): put their keys into one ExternalSecret", sync, prev)
			c.writable = false
		}
		switch {
		case c.writable && c.push != nil:
			classes[class], pushes[sync] = c.source, c.source
		case c.writable:
			classes[class], syncs[sync] = c.source, c.source
		}
	}
}

// convertDocument converts one document: none for stores and objects
// that are not ExternalSecrets or PushSecrets, one per store for a
// PushSecret.
func (cv *converter) convertDocument(d *document) []*conversion {
	group, _, _ := strings.Cut(d.apiVersion, "/")
	one := func(c *conversion) []*conversion {
		if c == nil {
			return nil
		}
		return []*conversion{c}
	}
	switch {
	case isESO(d.apiVersion) && d.kind == "ExternalSecret":
		return one(cv.convertESO(d))
	case isESO(d.apiVersion) && d.kind == "ClusterExternalSecret":
		return one(cv.convertCES(d))
	case d.apiVersion == kesVersion && d.kind == "ExternalSecret":
		return one(cv.convertKES(d))
	case d.apiVersion == esoV1alpha1 && d.kind == "PushSecret":
		return cv.convertPush(d)
	case isESO(d.apiVersion) && (d.kind == "SecretStore" || d.kind == "ClusterSecretStore"):
		return nil
	case group == esoGroup || strings.HasSuffix(group, "."+esoGroup) || group == "kubernetes-client.io":
		is := cv.issuesFor(d.where)
		is.unsupported("", "%s %s: keymount convert reads %s and %s ExternalSecret, ClusterExternalSecret, SecretStore and ClusterSecretStore, %s PushSecret, and %s ExternalSecret", d.apiVersion, d.kind, esoVersion, esoV1beta1, esoV1alpha1, kesVersion)
	case d.apiVersion == "v1" && (d.kind == "ConfigMap" || d.kind == "Secret"):
		is := cv.issuesFor(d.where)
		is.note("", "%s %s is read only where a Vault store's caProvider names it", d.apiVersion, d.kind)
	default:
		is := cv.issuesFor(d.where)
		is.note("", "ignored: %s %s is not an External Secrets object", d.apiVersion, d.kind)
	}
	return nil
}

// inputObject is the input's v1 ConfigMap or Secret namespace/name (kind
// ConfigMap or Secret), nil when the input has none.
func (cv *converter) inputObject(kind, namespace, name string) *document {
	return cv.objects[kind+"/"+objectName(namespace, name)]
}

func (cv *converter) issuesFor(object string) issues {
	return issues{object: object, list: &cv.issues}
}

// noIssues discards what it is told: for metadata that names the object
// before its issues have a name.
func (cv *converter) noIssues() issues {
	return issues{list: &cv.dummy}
}

// secretKeyPattern is the SecretSync CRD's pattern of sourcePath and
// targetKey.
var secretKeyPattern = regexp.MustCompile(`^[A-Za-z0-9.]([-A-Za-z0-9]+([-._a-zA-Z0-9]?[A-Za-z0-9])*)?(\/([0-9]+))*$`)

func validKey(k string) bool { return len(k) <= 253 && secretKeyPattern.MatchString(k) }

// checkKey checks a Secret key of the input: one a SecretSync accepts, once.
func (cv *converter) checkKey(is issues, path string, c *conversion, key string) bool {
	if !validKey(key) {
		is.unsupported(path, "the key %q is not one a SecretSync accepts (letters, digits, '-', '.', '_' not at either end)", key)
		return false
	}
	if slices.ContainsFunc(c.keys, func(k secretKey) bool { return k.targetKey == key }) {
		is.unsupported(path, "the key %q is listed twice; keep one", key)
		return false
	}
	return true
}

// finish checks what every conversion needs.
func (cv *converter) finish(c *conversion) {
	if c.push != nil {
		cv.finishPush(c)
		return
	}
	is := cv.issuesFor(c.source)
	c.writable = c.serviceAccount != "" && len(c.keys) > 0 && len(c.objects)+len(c.vaultObjects) > 0
	checkIdentity(is, c, "SecretSync")
	if len(c.keys) == 0 {
		is.unsupported("spec.data", "no key could be converted; the SecretSync needs at least one")
	}
	for _, m := range []map[string]string{c.labels, c.annotations} {
		for _, k := range sortedKeys(m) {
			if strings.HasPrefix(k, reservedPrefix) {
				is.unsupported("", "the Secret's label or annotation %s: the SecretSync CRD reserves keys starting with %s for the controller", k, reservedPrefix)
				delete(m, k)
			}
		}
	}
	// External Secrets and KES write a TLS Secret's keys as the store
	// holds them; keymount-controller splits them by default.
	if c.secretType == string(corev1.SecretTypeTLS) {
		if c.syncAnnotations == nil {
			c.syncAnnotations = map[string]string{}
		}
		c.syncAnnotations[annotationTLSSplit] = "false"
	}
	checkClass(is, c)
}

// checkIdentity reports a conversion with no ServiceAccount to read (or
// write, for a PushSecret: what) as.
func checkIdentity(is issues, c *conversion, what string) {
	switch {
	case c.serviceAccount == "" && c.provider == "vault":
		is.unsupported("", "no ServiceAccount to log in to Vault as: keymount logs in with Kubernetes auth as a ServiceAccount of the %s's namespace %q, not as External Secrets' controller; bind one to the Vault role (auth.kubernetes.serviceAccountRef) or pass --service-account NAME", what, c.namespace)
	case c.serviceAccount == "":
		verb := "read"
		if c.push != nil {
			verb = "write"
		}
		is.unsupported("", "no ServiceAccount to %s as: keymount %ss as a ServiceAccount of the %s's namespace %q (IRSA or Pod Identity), not as External Secrets' controller or its static keys; pass --role-arn ARN (the controller's role: convert writes a ServiceAccount with it) or --service-account NAME (one that has a role)", verb, verb, what, c.namespace)
	}
}

// annotationTLSSplit (controller/secretsync.AnnotationTLSSplit) "false"
// writes tls.crt and tls.key as the provider returns them.
const annotationTLSSplit = "keymount.io/tls-split"

// reservedPrefix starts the Secret labels and annotations a SecretSync may
// not ask for.
const reservedPrefix = "secrets-store.sync.x-k8s.io"

// parseDuration parses a Kubernetes duration as metav1.Duration does.
func parseDuration(s string) (time.Duration, error) {
	var d metav1.Duration
	if err := d.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
		return 0, err
	}
	return d.Duration, nil
}

func dedupe(list []Issue) []Issue {
	seen := map[Issue]bool{}
	out := list[:0:0]
	for _, i := range list {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}
