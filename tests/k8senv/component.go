package k8senv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/keymount/keymount/tests/poll"
)

// component is a control-plane program k8senv runs itself, beside the etcd
// and kube-apiserver envtest runs: kube-controller-manager or kube-scheduler.
type component struct {
	// name is its binary in the assets directory, and the name of its log,
	// of its directory under the environment's and of the serving
	// certificate it writes there (<name>.crt).
	name string
	// user is whom it authenticates as, in group system:masters.
	user string
	// args are its own flags, besides those every component gets.
	args []string
}

// process is a running component.
type process struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's answer, set before exited is closed
}

// startComponent starts c from assets, from the owner's thread, with its
// certificates under dir and its output in logs, waits until its /healthz
// answers ok and registers its stop.
//
// Every component gets the same client identity for its work and for the
// delegated authentication and authorization of its HTTPS server: left
// without the latter two, it would look for an in-cluster configuration
// (KUBERNETES_SERVICE_HOST), and nothing here may reach anything but this
// kube-apiserver. It skips looking up client CAs in kube-system's
// extension-apiserver-authentication ConfigMap: envtest configures no
// request-header CA, and the lookup would fill its log with errors. Its
// /healthz, always allowed, needs none. It serves on a free port of
// 127.0.0.1 with a self-signed certificate written to its cert dir, which
// the health check trusts.
func (e *Env) startComponent(t testing.TB, c component, assets, dir string, logs *logSet) {
	t.Helper()
	kubeconfig, _ := e.KubeconfigFor(t, c.user, []string{"system:masters"})
	certDir := mkdir(t, dir, c.name)
	port, err := freePort()
	if err != nil {
		t.Fatalf("k8senv: a port for %s: %v", c.name, err)
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authentication-skip-lookup=true",
		"--leader-elect=false",
		"--bind-address=" + loopback,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--v=2",
	}, c.args...)
	cmd := exec.Command(filepath.Join(assets, c.name), args...)
	log := logs.open(c.name)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	e.owner.run(func() { err = cmd.Start() })
	if err != nil {
		t.Fatalf("k8senv: starting %s: %v", c.name, err)
	}
	p := &process{name: c.name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.stop(30 * time.Second); err != nil {
			t.Errorf("k8senv: %v", err)
		}
	})

	if err := p.waitHealthy(port, filepath.Join(certDir, c.name+".crt")); err != nil {
		t.Fatalf("k8senv: %s did not start: %v", c.name, err)
	}
}

// waitHealthy polls https://127.0.0.1:port/healthz, trusting the certificate
// the process generates in its cert dir, until it answers 200 ok, the
// process exits or startTimeout passes.
func (p *process) waitHealthy(port int, certFile string) error {
	url := "https://" + net.JoinHostPort(loopback, strconv.Itoa(port)) + "/healthz"
	last := errors.New("no answer yet")
	err := poll.Wait(context.Background(), startTimeout, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("it exited: %w", p.err)
		default:
		}
		last = checkHealthz(ctx, url, certFile)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w; last /healthz check: %w", err, last)
	}
	return nil
}

func checkHealthz(ctx context.Context, url, certFile string) error {
	pem, err := os.ReadFile(certFile)
	if err != nil {
		return err // not written yet
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("no certificate in %s", certFile)
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// stop sends SIGTERM, and SIGKILL if the process has not exited after
// grace, then waits for it.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping %s: %w", p.name, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.name, grace)
}

// freePort returns a TCP port nothing listens on at 127.0.0.1 now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(loopback, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("unexpected listener address %v", l.Addr())
	}
	return addr.Port, nil
}
