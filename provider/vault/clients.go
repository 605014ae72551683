package vault

import (
	"fmt"
	"sync"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/provider/server"
	"github.com/keymount/keymount/provider/vault/spec"
)

// requestTimeout bounds one request to Vault.
const requestTimeout = 30 * time.Second

// clients holds one Vault client (and so one connection pool) per address,
// namespace and TLS setting. Requests use tokened clones.
type clients struct {
	mu sync.Mutex
	m  map[string]*vaultapi.Client
}

func clientKey(addr, ns string, t spec.TLS) string {
	return fmt.Sprintf("%s|%s|%+v", addr, ns, t)
}

// clientConfig is the configuration of addr's clients. The bound on a
// request is the HTTP client's, which covers reading the answer: the
// client's own Timeout would not do, as Logical().WriteRaw cancels the
// context of that timeout when it returns, before its caller reads the
// body (an issued certificate then failed with "context canceled").
func clientConfig(addr string, t spec.TLS) (*vaultapi.Config, error) {
	cfg := vaultapi.DefaultConfig()
	cfg.Address = addr
	cfg.Timeout = 0
	cfg.MaxRetries = 1
	tc := &vaultapi.TLSConfig{CACert: t.CACert, CAPath: t.CADir, TLSServerName: t.ServerName,
		ClientCert: t.ClientCert, ClientKey: t.ClientKey, Insecure: t.SkipVerify}
	if t.CACertPEM != "" {
		tc.CACertBytes = []byte(t.CACertPEM)
	}
	if err := cfg.ConfigureTLS(tc); err != nil {
		return nil, server.Mark(fmt.Errorf("vault TLS of %s (the class's %s, %s, %s, %s, %s or the provider's -vault-tls-* flags): %w",
			addr, spec.KeyCACert, spec.KeyCADir, spec.KeyCACertPEM, spec.KeyClientCert, spec.KeyClientKey, err), server.ErrFailedPrecondition)
	}
	cfg.HttpClient.Timeout = requestTimeout
	return cfg, nil
}

// get returns the base client (no token) of addr, Vault namespace ns and t.
func (c *clients) get(addr, ns string, t spec.TLS) (*vaultapi.Client, error) {
	key := clientKey(addr, ns, t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	cfg, err := clientConfig(addr, t)
	if err != nil {
		return nil, err
	}
	cl, err := vaultapi.NewClient(cfg)
	if err != nil {
		return nil, server.Mark(fmt.Errorf("vault client of %s: %w", addr, err), server.ErrInvalidParameters)
	}
	// NewClient takes VAULT_TOKEN and VAULT_NAMESPACE from the environment:
	// a login is always the pod's, the namespace always the class's.
	cl.ClearToken()
	cl.ClearNamespace()
	if ns != "" {
		cl.SetNamespace(ns)
	}
	if c.m == nil {
		c.m = map[string]*vaultapi.Client{}
	}
	c.m[key] = cl
	return cl, nil
}
