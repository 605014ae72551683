package spec

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/keymount/keymount/internal/classparams"
)

// Class parameters, as vault-csi-provider v1.7 names them, plus keymount's.
const (
	KeyAddress   = "vaultAddress"
	KeyRole      = "roleName"
	KeyAuthMount = "vaultAuthMountPath"
	KeyKubeMount = "vaultKubernetesMountPath" // vault-csi-provider's older name of vaultAuthMountPath
	KeyNamespace = "vaultNamespace"
	KeyCACert    = "vaultCACertPath"
	KeyCADir     = "vaultCADirectory"
	// KeyCACertPEM (keymount's): the PEM text of the CA bundle that signs
	// Vault's certificate, in the class itself (a CA is no secret), for a
	// class converted from a store's inline caBundle: no file to mount into
	// the provider. Not with vaultCACertPath or vaultCADirectory.
	KeyCACertPEM     = "vaultCACertPEM"
	KeyTLSServerName = "vaultTLSServerName"
	KeyClientCert    = "vaultTLSClientCertPath"
	KeyClientKey     = "vaultTLSClientKeyPath"
	KeySkipVerify    = "vaultSkipTLSVerify"
	KeyAudience      = "audience"
	KeyObjects       = "objects"
	// KeyShare (keymount's): "true" issues a leased secret once per
	// workload (class, namespace and service account) instead of once per
	// volume, so a Deployment's replicas share one credential.
	KeyShare = "shareAcrossReplicas"
	// KeyRevoke (keymount's): "true" revokes a volume's leases (its
	// workload's, with shareAcrossReplicas) once the provider learns the
	// volume is unpublished, instead of letting them run to their end. The
	// role's policy must grant update on sys/leases/revoke.
	KeyRevoke = "revokeOnUnpublish"
)

// Volume context keys the driver adds.
const (
	KeyPodName        = "csi.storage.k8s.io/pod.name"
	KeyPodNamespace   = "csi.storage.k8s.io/pod.namespace"
	KeyPodUID         = "csi.storage.k8s.io/pod.uid"
	KeyServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	KeyTokens         = "csi.storage.k8s.io/serviceAccount.tokens" //nolint:gosec // G101: an attribute key's name, not a credential.
	KeyClass          = "secretProviderClass"
)

// Defaults of vault-csi-provider.
const (
	DefaultAuthMount = "kubernetes"
	DefaultAudience  = "vault"
)

// TLS is how the provider reaches Vault.
type TLS struct {
	CACert, CADir, ServerName, ClientCert, ClientKey string
	// CACertPEM is the class's vaultCACertPEM, checked to hold
	// certificates.
	CACertPEM  string
	SkipVerify bool
}

// Spec is one parsed mount request.
type Spec struct {
	// Address of Vault; empty means the provider's --vault-addr.
	Address        string
	Role           string
	AuthMount      string
	VaultNamespace string
	TLS            TLS
	Audience       string
	Objects        []Object
	// Share is shareAcrossReplicas.
	Share bool
	// Revoke is revokeOnUnpublish.
	Revoke bool

	Namespace, ServiceAccount, PodName, PodUID, Class string
	// Token is the service account token of Audience (the driver's
	// serviceAccount.tokens). It is never printed.
	Token string
	// Permission is the mount's default file mode.
	Permission os.FileMode
}

// String prints the spec without its token.
func (s *Spec) String() string {
	return fmt.Sprintf("vault spec{address: %q, role: %q, auth: %q, pod: %s/%s, objects: %d, token: <redacted>}",
		s.Address, s.Role, s.AuthMount, s.Namespace, s.PodName, len(s.Objects))
}

// Defaults are the provider's defaults (vault-csi-provider's flags
// -vault-mount, -vault-namespace and -vault-tls-*) of the parameters a
// class does not set: a class's parameter, when set, wins field by field.
type Defaults struct {
	AuthMount      string
	VaultNamespace string
	TLS            TLS
}

// Parse reads the attributes of a mount request; d fills the parameters
// the class does not set. A parameter or object field it does not read is
// refused (see checkKeys), unless the class lists it under
// keymount.io/ignore-parameters.
func (d Defaults) Parse(attrs map[string]string, perm os.FileMode) (*Spec, error) {
	s, err := d.ParseIdentity(attrs)
	s.Permission = perm
	errs := []error{err}
	if s.Objects, err = parseObjects(attrs[KeyObjects], classparams.Ignored(attrs)); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// ParseIdentity reads what of a request's attributes says who logs in to
// which Vault, as Parse does, but not the objects: a push (keymount's
// push extension) logs in exactly as a mount does and names its paths
// itself.
func (d Defaults) ParseIdentity(attrs map[string]string) (*Spec, error) {
	s := &Spec{
		Address: strings.TrimRight(attrs[KeyAddress], "/"), Role: attrs[KeyRole],
		VaultNamespace: firstOf(attrs[KeyNamespace], d.VaultNamespace),
		Audience:       attrs[KeyAudience], Namespace: attrs[KeyPodNamespace], ServiceAccount: attrs[KeyServiceAccount],
		PodName: attrs[KeyPodName], PodUID: attrs[KeyPodUID], Class: attrs[KeyClass],
		TLS: TLS{CACert: firstOf(attrs[KeyCACert], d.TLS.CACert), CADir: firstOf(attrs[KeyCADir], d.TLS.CADir),
			ServerName: firstOf(attrs[KeyTLSServerName], d.TLS.ServerName),
			ClientCert: firstOf(attrs[KeyClientCert], d.TLS.ClientCert), ClientKey: firstOf(attrs[KeyClientKey], d.TLS.ClientKey)},
	}
	var errs []error
	if err := checkKeys(attrs); err != nil {
		errs = append(errs, err)
	}
	s.AuthMount = strings.Trim(firstOf(attrs[KeyAuthMount], attrs[KeyKubeMount], d.AuthMount, DefaultAuthMount), "/")
	s.AuthMount = strings.TrimPrefix(s.AuthMount, "auth/")
	if s.Audience == "" {
		s.Audience = DefaultAudience
	}
	if s.Role == "" {
		errs = append(errs, fmt.Errorf("%s is empty: set the Vault role of the %s auth method to log in with", KeyRole, s.AuthMount))
	}
	var err error
	s.TLS.SkipVerify = d.TLS.SkipVerify
	if v := attrs[KeySkipVerify]; v != "" {
		if s.TLS.SkipVerify, err = parseBool(attrs, KeySkipVerify); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Share, err = parseBool(attrs, KeyShare); err != nil {
		errs = append(errs, err)
	}
	if s.Revoke, err = parseBool(attrs, KeyRevoke); err != nil {
		errs = append(errs, err)
	}
	if err := s.TLS.setCACertPEM(attrs); err != nil {
		errs = append(errs, err)
	}
	if (s.TLS.ClientCert == "") != (s.TLS.ClientKey == "") {
		errs = append(errs, fmt.Errorf("set both %s and %s (or the provider's -vault-tls-client-cert and -vault-tls-client-key), or neither",
			KeyClientCert, KeyClientKey))
	}
	if s.Token, err = tokenFor(attrs[KeyTokens], s.Audience); err != nil {
		errs = append(errs, err)
	}
	if s.Share && s.Class == "" {
		errs = append(errs, fmt.Errorf("%s needs the volume context's %s", KeyShare, KeyClass))
	}
	return s, errors.Join(errs...)
}

// setCACertPEM sets the class's inline CA bundle, which replaces the CA
// files of the provider's flags but may not stand beside the class's own.
func (t *TLS) setCACertPEM(attrs map[string]string) error {
	pem := attrs[KeyCACertPEM]
	if pem == "" {
		return nil
	}
	if attrs[KeyCACert] != "" || attrs[KeyCADir] != "" {
		return fmt.Errorf("%s and %s or %s are both set: give the CA once", KeyCACertPEM, KeyCACert, KeyCADir)
	}
	if !x509.NewCertPool().AppendCertsFromPEM([]byte(pem)) {
		return fmt.Errorf("%s holds no PEM certificate: set the PEM text of the CA bundle (-----BEGIN CERTIFICATE-----...)", KeyCACertPEM)
	}
	t.CACert, t.CADir, t.CACertPEM = "", "", pem
	return nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func parseBool(attrs map[string]string, key string) (bool, error) {
	v, ok := attrs[key]
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s %q: use \"true\" or \"false\"", key, v)
	}
	return b, nil
}

// tokenFor picks the token of audience from the driver's JSON map audience
// → {token, expirationTimestamp}. An absent map or audience is no error
// here: the caller refuses a mount without a token. Errors never quote the
// input.
func tokenFor(raw, audience string) (string, error) {
	if raw == "" {
		return "", nil
	}
	var entries map[string]struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		return "", fmt.Errorf("%s is not a JSON object of audience to {token, expirationTimestamp} (contents not shown); check the CSIDriver's tokenRequests", KeyTokens)
	}
	return entries[audience].Token, nil
}
