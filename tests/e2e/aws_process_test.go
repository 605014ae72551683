package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/keymount/keymount/tests/motoserver"
)

// awsEnv is the environment of the AWS provider: moto's fake static
// credentials, a region, no proxy, no shared config or instance metadata,
// so that nothing falls back to a real AWS endpoint.
func awsEnv(endpoint string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.TempDir(),
		"AWS_ACCESS_KEY_ID=" + motoserver.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + motoserver.SecretAccessKey,
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
