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
	"strings"
	"syscall"
	"testing"
	"time"
)

// controllers are the kube-controller-manager controllers the environment
// runs: the garbage collector only, so ownerReferences behave as in a
// cluster while nothing else (no namespace, no ServiceAccount controller)
// acts behind a test's back.
const controllers = "garbage-collector-controller"

// controllerManagerConfig is what startControllerManager needs.
type controllerManagerConfig struct {
	path       string   // the kube-controller-manager binary
	kubeconfig string   // an identity in system:masters
	certDir    string   // where it writes its self-signed serving certificate
	log        *os.File // its stdout and stderr
	extra      []string // controllers to run besides the garbage collector
}

// controllerManager is a running kube-controller-manager.
type controllerManager struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	err    error         // cmd.Wait's answer, set before exited is closed
}

// startControllerManager starts kube-controller-manager from the owner's
// thread, waits until its /healthz answers ok and registers its stop.
func startControllerManager(t testing.TB, owner *processOwner, cfg controllerManagerConfig) {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("k8senv: a port for kube-controller-manager: %v", err)
	}
	cmd := exec.Command(cfg.path,
		"--kubeconfig="+cfg.kubeconfig,
		"--controllers="+strings.Join(append([]string{controllers}, cfg.extra...), ","),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address="+loopback,
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+cfg.certDir,
		"--v=2",
	)
	cmd.Stdout, cmd.Stderr = cfg.log, cfg.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	owner.run(func() { err = cmd.Start() })
	if err != nil {
		t.Fatalf("k8senv: starting kube-controller-manager: %v", err)
	}
	m := &controllerManager{cmd: cmd, exited: make(chan struct{})}
	go func() {
		m.err = cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		if err := m.stop(30 * time.Second); err != nil {
			t.Errorf("k8senv: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := m.waitHealthy(ctx, port, filepath.Join(cfg.certDir, "kube-controller-manager.crt")); err != nil {
		t.Fatalf("k8senv: kube-controller-manager did not start: %v", err)
	}
}

// waitHealthy polls https://127.0.0.1:port/healthz, trusting the certificate
// the process generates in its cert dir, until it answers 200 ok, the
// process exits or ctx ends.
func (m *controllerManager) waitHealthy(ctx context.Context, port int, certFile string) error {
	url := "https://" + net.JoinHostPort(loopback, strconv.Itoa(port)) + "/healthz"
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no answer yet")
	for {
		select {
		case <-m.exited:
			return fmt.Errorf("it exited: %w", m.err)
		case <-ctx.Done():
			return fmt.Errorf("%w; last /healthz check: %w", ctx.Err(), last)
		case <-tick.C:
		}
		last = checkHealthz(ctx, url, certFile)
		if last == nil {
			return nil
		}
	}
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
func (m *controllerManager) stop(grace time.Duration) error {
	select {
	case <-m.exited:
		return nil
	default:
	}
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping kube-controller-manager: %w", err)
	}
	select {
	case <-m.exited:
		return nil
	case <-time.After(grace):
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	return fmt.Errorf("kube-controller-manager did not stop within %s of SIGTERM: killed", grace)
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
