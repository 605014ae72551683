package motoserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
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
	// Port 0: moto_server binds a port the kernel picks and says which
	// ("Running on http://127.0.0.1:<port>"). A port picked here and
	// passed in could be taken meanwhile by another test's server, whose
	// answers would then look like moto's.
	out := syncBuffer{port: make(chan int, 1)}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", "0")
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

	var port int
	select {
	case port = <-out.port:
	case <-exited:
		t.Fatalf("moto_server exited before it listened: %v\noutput:\n%s", waitErr, out.String())
	case <-time.After(startTimeout):
		t.Fatalf("moto_server did not say its port within %v\noutput:\n%s", startTimeout, out.String())
	}
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

// syncBuffer collects the server's output for a failure message, and
// sends on port the port of the first "Running on" line it holds.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	port  chan int
	found bool
}

// listening is werkzeug's line naming the address it serves.
var listening = regexp.MustCompile(`Running on http://127\.0\.0\.1:([0-9]+)`)

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if !b.found {
		if m := listening.FindSubmatch(b.buf.Bytes()); m != nil {
			if port, perr := strconv.Atoi(string(m[1])); perr == nil && port > 0 {
				b.found = true
				b.port <- port
			}
		}
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
