package motoserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Fake static credentials moto accepts. They are not secrets.
const (
	AccessKeyID     = "testing"
	SecretAccessKey = "testing"
)

// startTimeout bounds how long moto_server may take to answer.
const startTimeout = 30 * time.Second

// Credentials returns a provider of the fake static credentials.
func Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")
}

// Start runs moto_server on 127.0.0.1 and returns its endpoint
// ("http://127.0.0.1:<port>"). It waits until the server answers and stops it
// in t.Cleanup. A server that cannot start fails the test: it never skips.
func Start(t testing.TB) (endpoint string) {
	t.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH (install the test toolchain): %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("finding a free port for moto_server: %v", err)
	}
	var out syncBuffer
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto_server: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// Kill the whole process group: moto_server may fork workers.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitReady(endpoint, exited, func() error { return waitErr }); err != nil {
		t.Fatalf("moto_server did not start: %v\noutput:\n%s", err, out.String())
	}
	return endpoint
}

// waitReady polls the endpoint until it answers over HTTP.
func waitReady(endpoint string, exited <-chan struct{}, exitErr func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/", http.NoBody)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited early: %w", exitErr())
		case <-ctx.Done():
			return fmt.Errorf("no answer at %s within %v", endpoint, startTimeout)
		case <-tick.C:
		}
	}
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("unexpected address %v", l.Addr())
	}
	return addr.Port, nil
}

// syncBuffer collects the server's output for a failure message.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
