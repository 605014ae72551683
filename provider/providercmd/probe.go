package providercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keymount/keymount/provider/server"
)

// DefaultProbeTimeout is --probe-timeout's default: within the 5 seconds
// the chart gives the probe (timeoutSeconds), so a provider that does not
// answer fails with the probe's own line, not with kubelet's timeout.
const DefaultProbeTimeout = 4 * time.Second

// Probe is the --probe mode of a provider binary, the command of its
// container's liveness and readiness probes: it asks the provider serving
// on the socket its flags name (--provider-dir, --name) whether it serves,
// through gRPC's standard health service, and exits 0 when it answers
// SERVING within Timeout, 1 otherwise, after one line saying why. A
// provider frozen or deadlocked (its process stopped, its server wedged)
// does not answer: the probe fails and kubelet restarts the container.
// The images are minimal (no shell, no grpc_health_probe): the probe is
// the provider binary itself.
type Probe struct {
	// On is --probe: probe the provider instead of serving.
	On bool
	// Timeout is --probe-timeout: how long the provider has to answer.
	Timeout time.Duration
}

// AddFlags binds --probe and --probe-timeout to fs.
func (p *Probe) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&p.On, "probe", false, "probe the provider serving on <provider-dir>/<name>.sock instead of serving "+
		"(the container's liveness and readiness probe): exit 0 when it answers gRPC's health check SERVING within --probe-timeout, else 1")
	fs.DurationVar(&p.Timeout, "probe-timeout", DefaultProbeTimeout, "how long --probe waits for the provider's answer")
}

// Run probes the provider of cfg's socket and returns the exit code: 0
// when it serves; 1 after one line on w naming binary, the socket and why.
func (p Probe) Run(w io.Writer, binary string, cfg server.Config) int {
	if err := Check(context.Background(), cfg.SocketPath(), p.Timeout); err != nil {
		_, _ = fmt.Fprintf(w, "%s: probe: %s\n", binary, oneLine(err.Error()))
		return 1
	}
	return 0
}

// ErrNotServing is the error of Check when the provider answers that it
// does not serve (it is stopping).
var ErrNotServing = errors.New("the provider answers NOT_SERVING")

// Check asks the provider serving on the unix socket path whether it
// serves (grpc.health.v1.Health/Check of the whole server) and waits at
// most timeout for the answer. nil: it answered SERVING.
func Check(ctx context.Context, path string, timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("--probe-timeout %s is not positive", timeout)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no provider socket at %s: %w", path, err)
	}
	dialer := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	cc, err := grpc.NewClient("passthrough:///localhost",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer),
	)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A provider whose process is stopped still has its socket accept
	// connections (the kernel's backlog): the call then waits for an
	// answer that never comes, until the deadline. A socket nobody serves
	// refuses the connection and fails the call at once.
	resp, err := healthgrpc.NewHealthClient(cc).Check(ctx, &healthgrpc.HealthCheckRequest{})
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("the provider on %s did not answer its health check within %s", path, timeout)
	case err != nil:
		return fmt.Errorf("the provider on %s failed its health check: %w", path, err)
	case resp.GetStatus() != healthgrpc.HealthCheckResponse_SERVING:
		return fmt.Errorf("%s: %w (%s)", path, ErrNotServing, resp.GetStatus())
	}
	return nil
}

// oneLine folds line breaks into spaces: kubelet shows the probe's output
// in one event.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
