package motoserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/keymount/keymount/tests/poll"
)

// Fake static credentials moto accepts. They are not secrets.
const (
	AccessKeyID     = "testing"
	SecretAccessKey = "testing"
)

// startTimeout bounds how long moto_server may take to say its port, and
// then to answer: a bound only a stuck start reaches.
const startTimeout = 3 * time.Minute

// Credentials returns a provider of the fake static credentials.
func Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")
}

// Start runs moto_server on 127.0.0.1 and returns its endpoint
// ("http://127.0.0.1:<port>"). It waits until the server answers and stops it
// in t.Cleanup. A server that cannot start fails the test: it never skips.
func Start(t testing.TB) (endpoint string) {
	t.Helper()
	return start(t, nil)
}

// StartLogging is Start that also appends moto_server's output to the file
// at path, for suites that keep their processes' logs or scan them.
func StartLogging(t testing.TB, path string) (endpoint string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("moto_server's log: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() }) // runs after the server's own cleanup has stopped it
	return start(t, f)
}

func start(t testing.TB, log io.Writer) (endpoint string) {
	t.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH (install the test toolchain): %v", err)
	}
	// Port 0: moto_server binds a port the kernel picks and says which
	// ("Running on http://127.0.0.1:<port>"). A port picked here and
	// passed in could be taken meanwhile by another test's server, whose
	// answers would then look like moto's.
	out := syncBuffer{port: make(chan int, 1), log: log}
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
	client := &http.Client{Timeout: time.Second}
	err = poll.Wait(t.Context(), startTimeout, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("exited early: %w", waitErr)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/", http.NoBody)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not answering yet: poll again
		}
		_ = resp.Body.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("moto_server did not start at %s: %v\noutput:\n%s", endpoint, err, out.String())
	}
	return endpoint
}

// syncBuffer collects the server's output for a failure message, copies
// it to log (when set), and sends on port the port of the first "Running
// on" line it holds.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	log   io.Writer
	port  chan int
	found bool
}

// listening is werkzeug's line naming the address it serves.
var listening = regexp.MustCompile(`Running on http://127\.0\.0\.1:([0-9]+)`)

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.log != nil {
		_, _ = b.log.Write(p) // a log that fails to write loses lines, not the server
	}
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
