package grpcrecover

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/internal/klogtest"
	"github.com/keymount/keymount/internal/unixsocket/sockettest"
)

const secret = "SECRETVALUE"

// panicky is a health service whose Check panics the way the request's
// service name asks.
type panicky struct {
	healthpb.UnimplementedHealthServer
}

func (panicky) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	switch name, _, _ := strings.Cut(req.GetService(), "/"); name {
	case "string":
		panic("boom")
	case "error":
		panic(errors.New("broken invariant"))
	case "runtime":
		counts := []int{}
		counts[len(name)]++ // index out of range
	case "nil":
		panic(nil) //nolint:govet // nilness: the case under test is a panic with nil.
	case "fails":
		return nil, status.Error(codes.NotFound, "no such service")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serve runs a real gRPC server with the interceptor on a unix socket and
// returns a client connected to it.
func serve(t *testing.T) healthpb.HealthClient {
	t.Helper()
	path := sockettest.Path(t, "h.sock")
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(UnaryServerInterceptor()))
	healthpb.RegisterHealthServer(gs, panicky{})
	served := make(chan error, 1)
	go func() { served <- gs.Serve(l) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func TestUnaryServerInterceptor(t *testing.T) {
	client := serve(t)
	const method = "/grpc.health.v1.Health/Check"
	tests := []struct {
		name      string
		wantCode  codes.Code
		wantPanic string // the panic value in the log; "" for no log line
	}{
		{"string", codes.Internal, `panic="boom"`},
		{"error", codes.Internal, `panic="broken invariant"`},
		{"runtime", codes.Internal, `panic="runtime error: index out of range [7] with length 0"`},
		{"nil", codes.Internal, `panic="panic called with nil argument`},
		{"fails", codes.NotFound, ""},
		{"ok", codes.OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logged := klogtest.Capture(t)
			resp, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{Service: tc.name + "/" + secret})
			if got := status.Code(err); got != tc.wantCode {
				t.Fatalf("code = %v, want %v (err %v)", got, tc.wantCode, err)
			}
			if tc.wantCode == codes.OK && resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("status = %v, want SERVING", resp.GetStatus())
			}
			log := logged.String()
			if tc.wantPanic == "" {
				if log != "" {
					t.Errorf("logged %q for a call that did not panic", log)
				}
				return
			}
			want := "internal error in " + method + ": the handler panicked; see the driver/provider log"
			if got := status.Convert(err).Message(); got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
			assertLoggedOnce(t, log, method, tc.wantPanic)
		})
	}

	// The process survived every panic and still serves.
	if _, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "ok"}); err != nil {
		t.Errorf("Check after the panics: %v", err)
	}
}

// assertLoggedOnce checks that log holds one panic line with the handler, the method,
// the panic value and a stack through the handler, and not the request.
func assertLoggedOnce(t *testing.T, log, method, wantPanic string) {
	t.Helper()
	if n := strings.Count(log, `"recovered a panic"`); n != 1 {
		t.Errorf("panic logged %d times, want once:\n%s", n, log)
	}
	for _, want := range []string{`handler="grpc"`, `in="` + method + `"`, wantPanic, "stack=", "grpcrecover.panicky."} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, secret) {
		t.Errorf("log holds the request:\n%s", log)
	}
}
