package convert

import (
	"fmt"
)

// annotationRoleARN is IRSA's ServiceAccount annotation: the role whose
// credentials the ServiceAccount's tokens are exchanged for.
const annotationRoleARN = "eks.amazonaws.com/role-arn"

// serviceAccountPrefix starts the name of the ServiceAccounts convert
// writes: keymount-<store name>, in the SecretSync's namespace.
const serviceAccountPrefix = "keymount-"

// serviceAccount is a ServiceAccount the output writes for a store that
// read as External Secrets' controller (with or without a role to assume).
type serviceAccount struct {
	namespace, name string
	// role is the IAM role the ServiceAccount reads as: IRSA's annotation,
	// or (podIdentity) the role of the association AWS needs.
	role        string
	podIdentity bool
	// source names the first ExternalSecret that needs it.
	source string
}

func (sa *serviceAccount) key() string { return objectName(sa.namespace, sa.name) }

// identity chooses the ServiceAccount the SecretSync of c reads as, from
// its store st:
//   - a Vault store: its auth.kubernetes.serviceAccountRef, else
//     --service-account;
//   - an AWS store with role (the role External Secrets assumed, from its
//     controller's or the jwt ServiceAccount's identity): a ServiceAccount
//     keymount-<store> of the SecretSync's namespace that reads as that
//     role directly, IRSA's annotation on it (or EKS Pod Identity with
//     --pod-identity);
//   - jwt auth: that ServiceAccount;
//   - no auth (External Secrets' controller's own identity), or jwt auth
//     naming External Secrets' own ServiceAccount in another namespace
//     (readESOStore leaves it out with --role-arn): with --role-arn (the
//     controller's role), a ServiceAccount as for role; else
//     --service-account; else none (reported by finish).
func (cv *converter) identity(c *conversion, st *esoStoreInfo) {
	switch {
	case st.vault != nil || st.staticKeys:
		c.serviceAccount = st.serviceAccount
	case st.role != "":
		cv.roleServiceAccount(c, st, st.role)
	case st.serviceAccount != "":
		c.serviceAccount = st.serviceAccount
	case cv.opts.RoleARN != "":
		cv.roleServiceAccount(c, st, cv.opts.RoleARN)
	}
	if c.serviceAccount == "" {
		c.serviceAccount = cv.opts.ServiceAccount
	}
}

// roleServiceAccount makes c read as a ServiceAccount of its namespace
// written by the output, with role.
func (cv *converter) roleServiceAccount(c *conversion, st *esoStoreInfo, role string) {
	sa := &serviceAccount{namespace: c.namespace, name: serviceAccountPrefix + st.name, role: role,
		podIdentity: cv.opts.PodIdentity, source: c.source}
	c.serviceAccount, c.newServiceAccount, c.podIdentity = sa.name, sa, sa.podIdentity
	sub := fmt.Sprintf("system:serviceaccount:%s:%s", sa.namespace, sa.name)
	is := cv.issuesFor("ServiceAccount " + sa.key())
	if sa.podIdentity {
		is.note("", "EKS Pod Identity: AWS must associate the role with the ServiceAccount %s (an AWS object, not a Kubernetes one): "+
			"aws eks create-pod-identity-association --cluster-name CLUSTER --namespace %s --service-account %s --role-arn %s; "+
			"the role's trust policy must allow pods.eks.amazonaws.com sts:AssumeRole and sts:TagSession",
			sa.key(), sa.namespace, sa.name, role)
		return
	}
	is.note("", "IRSA: the ServiceAccount %s reads as %s (annotation %s); the role's trust policy must allow "+
		"sts:AssumeRoleWithWebIdentity from the cluster's OIDC provider for the subject %s",
		sa.key(), role, annotationRoleARN, sub)
}

// checkServiceAccounts reports two conversions that need the same
// ServiceAccount with different roles; the later one is not written.
func (cv *converter) checkServiceAccounts(list []*conversion) {
	seen := map[string]*serviceAccount{}
	for _, c := range list {
		sa := c.newServiceAccount
		if !c.writable || sa == nil {
			continue
		}
		prev, ok := seen[sa.key()]
		switch {
		case !ok:
			seen[sa.key()] = sa
		case prev.role != sa.role:
			cv.issuesFor(c.source).unsupported("spec.secretStoreRef",
				"the ServiceAccount %s would read as %s for %s and as %s here; rename one store", sa.key(), prev.role, prev.source, sa.role)
			c.writable = false
		}
	}
}

// outServiceAccount is a written ServiceAccount.
type outServiceAccount struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   outMeta `yaml:"metadata"`
}

func (sa *serviceAccount) object() *outServiceAccount {
	m := outMeta{Name: sa.name, Namespace: sa.namespace}
	if !sa.podIdentity {
		m.Annotations = map[string]string{annotationRoleARN: sa.role}
	}
	return &outServiceAccount{APIVersion: "v1", Kind: "ServiceAccount", Metadata: m}
}
