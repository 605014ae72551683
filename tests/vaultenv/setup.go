package vaultenv

import (
	"fmt"
	"testing"
	"time"
)

// setup enables the audit device, the engines and (with opts.Kube) the
// auth methods.
func (v *Vault) setup(t testing.TB, opts Options) {
	t.Helper()
	v.Write(t, "sys/audit/file", map[string]any{"type": "file", "options": map[string]any{"file_path": v.auditLog}})
	v.Write(t, "sys/mounts/"+KVv1Mount, map[string]any{"type": "kv", "options": map[string]any{"version": "1"}})
	// The dev server mounts KV version 2 at secret/ already.
	v.Write(t, "sys/mounts/"+PKIMount, map[string]any{"type": "pki", "config": map[string]any{"max_lease_ttl": "87600h"}})
	v.Write(t, PKIMount+"/root/generate/internal", map[string]any{"common_name": "keymount test root", "ttl": "87600h"})
	if opts.AWSEndpoint != "" {
		v.setupAWS(t, opts.AWSEndpoint)
	}
	if opts.Kube != nil {
		v.setupKube(t, opts.Kube)
	}
}

// PKIRole adds a PKI role issuing certificates for any name under
// example.com, valid for ttl; with lease, each certificate comes with a
// (non-renewable) Vault lease.
func (v *Vault) PKIRole(t testing.TB, name string, certTTL time.Duration, lease bool) {
	t.Helper()
	v.Write(t, PKIMount+"/roles/"+name, map[string]any{
		"allowed_domains": "example.com", "allow_subdomains": true,
		"ttl": ttl(certTTL), "max_ttl": ttl(certTTL), "generate_lease": lease,
		"key_type": "ec", "key_bits": 256,
	})
}

// CertificateRevoked tells whether the PKI engine lists the certificate of
// serial (as issued: hex pairs joined by colons) as revoked.
func (v *Vault) CertificateRevoked(t testing.TB, serial string) bool {
	t.Helper()
	sec, err := v.Client.Logical().ReadWithContext(t.Context(), PKIMount+"/cert/"+serial)
	if err != nil || sec == nil {
		t.Fatalf("read the certificate %s: %v", serial, err)
	}
	rt, ok := sec.Data["revocation_time"] // Unix seconds, 0 while not revoked
	if !ok {
		t.Fatalf("the certificate %s has no revocation_time", serial)
	}
	return fmt.Sprint(rt) != "0"
}

// setupAWS points the AWS secrets engine at moto with moto's fake root
// credentials.
func (v *Vault) setupAWS(t testing.TB, endpoint string) {
	t.Helper()
	v.Write(t, "sys/mounts/"+AWSMount, map[string]any{"type": "aws"})
	v.Write(t, AWSMount+"/config/root", map[string]any{
		"access_key": "testing", "secret_key": "testing", "region": "us-east-1",
		"iam_endpoint": endpoint, "sts_endpoint": endpoint, "max_retries": 1,
	})
}

// AWSRole adds an AWS role whose credentials are a new IAM user's access
// key: a renewable lease of leaseTTL, at most maxTTL in all.
func (v *Vault) AWSRole(t testing.TB, name string, leaseTTL, maxTTL time.Duration) {
	t.Helper()
	v.Write(t, AWSMount+"/config/lease", map[string]any{"lease": ttl(leaseTTL), "lease_max": ttl(maxTTL)})
	v.Write(t, AWSMount+"/roles/"+name, map[string]any{
		"credential_type": "iam_user",
		"policy_document": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}`,
	})
}
