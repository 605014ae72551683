package bench_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Fake static credentials moto accepts; not secrets.
const (
	motoAccessKeyID     = "testing"
	motoSecretAccessKey = "testing"
	motoRegion          = "eu-west-1"
)

// motoStartTimeout bounds how long moto_server may take to answer.
const motoStartTimeout = 60 * time.Second

// awsEnv is the environment of moto_server and the AWS provider: fake static
// credentials, a region, no proxy, no shared config or instance metadata,
// so that nothing reaches a real AWS endpoint.
func awsEnv() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"AWS_ACCESS_KEY_ID=" + motoAccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + motoSecretAccessKey,
		"AWS_REGION=" + motoRegion,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
		"NO_PROXY=*",
	}
}

// startMoto runs moto_server on 127.0.0.1 on a free port, with its log in
// dir, and returns its endpoint. It is killed, with any worker it forked,
// when the benchmark ends.
func startMoto(b *testing.B, dir string) string {
	b.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		b.Fatalf("moto_server is not on PATH (install the test toolchain): %v", err)
	}
	port := freePort(b)
	c, err := startChild("moto_server", filepath.Join(dir, "moto.log"), path, awsEnv(), "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.proc.Exited()
	})
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(b.Context(), motoStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/", http.NoBody)
		if err != nil {
			b.Fatal(err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return endpoint
		}
		select {
		case <-c.proc.Exited():
			b.Fatalf("moto_server exited: %v\n%s", c.exitErr(), c.logTail())
		case <-ctx.Done():
			b.Fatalf("moto_server did not answer at %s within %s\n%s", endpoint, motoStartTimeout, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// storeCounter is a reverse proxy on 127.0.0.1 in front of moto that counts
// the requests going through it: Secrets Manager and SSM calls (JSON
// protocol, X-Amz-Target) apart from the rest (STS).
type storeCounter struct {
	url   string
	store atomic.Int64
	other atomic.Int64
}

// startStoreCounter serves the counting proxy to moto at endpoint until the
// benchmark ends.
func startStoreCounter(b *testing.B, endpoint string) *storeCounter {
	b.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		b.Fatal(err)
	}
	c := &storeCounter{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	// Requests still in flight when the provider stops are cancelled:
	// answer them 502 without logging.
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "" {
			c.store.Add(1)
		} else {
			c.other.Add(1)
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("store counter: %v", err)
		}
	}()
	b.Cleanup(func() { _ = srv.Close() })
	c.url = "http://" + l.Addr().String()
	return c
}
