package vaultenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/keymount/keymount/tests/k8senv"
	"github.com/keymount/keymount/tests/poll"
)

// BinEnv names the Vault binary; `make vault-env` builds it and `make test`
// sets the variable.
const BinEnv = "VAULT_BIN"

// Mount paths of what Start enables.
const (
	KVv1Mount       = "kv1"
	KVv2Mount       = "secret"
	PKIMount        = "pki"
	AWSMount        = "aws"
	KubernetesMount = "kubernetes"
	JWTMount        = "jwt"
)

// startTimeout bounds how long the server may take to answer; generous for
// a loaded 2-core machine.
const startTimeout = 90 * time.Second

// Options choose what Start enables besides KV and PKI.
type Options struct {
	// Kube enables Kubernetes and JWT auth against this API server.
	Kube *k8senv.Env
	// AWSEndpoint, a moto_server's, enables the AWS secrets engine.
	AWSEndpoint string
}

// Vault is a running dev server.
type Vault struct {
	// Addr is its address, http://127.0.0.1:<port>.
	Addr string
	// RootToken is the dev server's root token.
	RootToken string
	// Client is a root client. Do not change its token.
	Client *vaultapi.Client

	auditLog string
	kube     *k8senv.Env
}

// Start runs `vault server -dev` on a free loopback port, enables what
// opts ask for, and returns once everything is set up.
func Start(t testing.TB, opts Options) *Vault {
	t.Helper()
	bin := os.Getenv(BinEnv)
	if bin == "" {
		t.Fatalf("%s is unset: run `make vault-env` and export %s=$(bash hack/install-vault.sh --print-path)", BinEnv, BinEnv)
	}
	if _, err := os.Stat(bin); err != nil { //nolint:gosec // G703: the Vault binary the test was told to run
		t.Fatalf("%s=%s: %v (run `make vault-env`)", BinEnv, bin, err)
	}
	dir := t.TempDir()
	port := freePort(t)
	root := "root-" + randomHex(t)
	v := &Vault{Addr: "http://127.0.0.1:" + strconv.Itoa(port), RootToken: root,
		auditLog: filepath.Join(dir, "audit.log"), kube: opts.Kube}
	logPath := filepath.Join(dir, "vault.log")
	run(t, bin, dir, logPath, "server", "-dev", "-dev-root-token-id="+root,
		"-dev-listen-address=127.0.0.1:"+strconv.Itoa(port))
	v.Client = v.newRootClient(t, logPath)
	v.setup(t, opts)
	return v
}

// run starts the server with a clean environment (no VAULT_* variable of
// the test's, HOME in dir so no token helper file lands elsewhere) and kills
// it when the test ends.
func run(t testing.TB, bin, dir, logPath string, args ...string) {
	t.Helper()
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...) //nolint:gosec // G204: the binary make vault-env built.
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	go func() {
		<-exited
		if cmd.ProcessState != nil && !cmd.ProcessState.Success() && !t.Failed() {
			t.Logf("vault exited: %v (log: %s)", cmd.ProcessState, logPath)
		}
	}()
}

// newRootClient waits until the server answers unsealed and returns a root
// client.
func (v *Vault) newRootClient(t testing.TB, logPath string) *vaultapi.Client {
	t.Helper()
	cfg := vaultapi.DefaultConfig()
	cfg.Address = v.Addr
	c, err := vaultapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(v.RootToken)
	c.ClearNamespace()
	var last error
	err = poll.Wait(t.Context(), startTimeout, func(ctx context.Context) (bool, error) {
		h, err := c.Sys().HealthWithContext(ctx)
		if err != nil {
			last = err
			return false, nil //nolint:nilerr // not up yet: poll again; the last error is reported at the deadline
		}
		return h.Initialized && !h.Sealed, nil
	})
	if err != nil {
		log, _ := os.ReadFile(logPath)
		t.Fatalf("vault did not start at %s: %v (last: %v)\nlog:\n%s", v.Addr, err, last, log)
	}
	return c
}

// Write writes data to path as root and returns Vault's answer.
func (v *Vault) Write(t testing.TB, path string, data map[string]any) *vaultapi.Secret {
	t.Helper()
	s, err := v.Client.Logical().WriteWithContext(t.Context(), path, data)
	if err != nil {
		t.Fatalf("vault write %s: %v", path, err)
	}
	return s
}

// Policy writes an ACL policy.
func (v *Vault) Policy(t testing.TB, name, hcl string) {
	t.Helper()
	if err := v.Client.Sys().PutPolicyWithContext(t.Context(), name, hcl); err != nil {
		t.Fatalf("vault policy %s: %v", name, err)
	}
}

// PutKVv2 writes a new version of secret/<name> and returns its number.
func (v *Vault) PutKVv2(t testing.TB, name string, data map[string]any) int {
	t.Helper()
	s := v.Write(t, KVv2Mount+"/data/"+name, map[string]any{"data": data})
	num, _ := s.Data["version"].(json.Number)
	n, err := num.Int64()
	if err != nil {
		t.Fatalf("secret/%s: version: %v", name, err)
	}
	return int(n)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("unexpected address %v", l.Addr())
	}
	return addr.Port
}

func randomHex(t testing.TB) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ttl formats d as Vault's seconds.
func ttl(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }
