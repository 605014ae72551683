package e2e

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// motoStartTimeout bounds how long moto_server may take to answer.
const motoStartTimeout = 60 * time.Second

// fake static credentials moto accepts; not secrets.
const (
	motoAccessKeyID     = "testing"
	motoSecretAccessKey = "testing"
)

// awsEnv is the environment of the AWS provider and moto_server: fake
// static credentials, a region, no proxy, no shared config or instance
// metadata, so that nothing falls back to a real AWS endpoint.
func awsEnv(endpoint string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"AWS_ACCESS_KEY_ID=" + motoAccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + motoSecretAccessKey,
		"AWS_REGION=eu-west-1",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
		"NO_PROXY=*",
	}
	if endpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL="+endpoint)
	}
	return env
}

// startMoto runs moto_server on 127.0.0.1 on a free port and returns its
// endpoint; it is killed, with any worker it forked, when the test ends.
// A moto_server that cannot start fails the test.
func startMoto(t *testing.T, logDir string) string {
	t.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is not on PATH (install the test toolchain): %v", err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatalf("a free port for moto_server: %v", err)
	}
	logPath := filepath.Join(logDir, "moto.log")
	p, err := startEnvProcess("moto_server", logPath, path, awsEnv(""), "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	})
	endpoint := "http://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(t.Context(), motoStartTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/", http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			return endpoint
		}
		if !p.alive() {
			t.Fatalf("moto_server exited: %s\n%s", exitStatus(p.err), tail(logPath, logTailLines))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("moto_server did not answer at %s within %s\n%s", endpoint, motoStartTimeout, tail(logPath, logTailLines))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freeLoopbackPort asks the kernel for an unused loopback port.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("not a TCP address")
	}
	return addr.Port, nil
}

// buildAWSProvider builds keymount-provider-aws, without -race, into a
// directory of the test and returns its path.
func buildAWSProvider(t *testing.T, repo string) string {
	t.Helper()
	return buildCommand(t, repo, "keymount-provider-aws")
}

// buildCommand builds ./cmd/<name>, without -race, into a directory of the
// test and returns its path.
func buildCommand(t *testing.T, repo, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(goTool(), "build", "-ldflags=-X=main.version="+binaryVersion, "-o", out, "./cmd/"+name)
	cmd.Dir = repo
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of %s: %v\n%s", name, err, b)
	}
	return out
}
