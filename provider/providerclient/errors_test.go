package providerclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
)

// mountWith serves a provider whose Mount is mount and calls Mount on it
// through a Client configured by cfg (Dirs filled in).
func mountWith(t *testing.T, cfg Config, mount func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error)) error {
	t.Helper()
	dir := tempDir(t)
	serve(t, dir, "aws", &fakeProvider{mount: mount})
	cfg.Dirs = []string{dir}
	c := newClient(t, cfg)
	resp, err := c.Mount(t.Context(), "aws", okMountRequest())
	if err == nil {
		t.Fatalf("Mount() = %v; want an error", resp)
	}
	return err
}

// checkProviderError checks err is a *ProviderError with want's fields and
// that its gRPC code survives wrapping.
func checkProviderError(t *testing.T, err error, want *ProviderError) {
	t.Helper()
	if !errors.Is(err, ErrProviderFailed) {
		t.Errorf("error %v does not match ErrProviderFailed", err)
	}
	var pe *ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ProviderError", err, err)
	}
	if diff := cmp.Diff(want, pe); diff != "" {
		t.Errorf("ProviderError (-want +got):\n%s", diff)
	}
	wrapped := fmt.Errorf("publish: %w", err)
	if got := status.Code(wrapped); got != want.Code {
		t.Errorf("status.Code(wrapped error) = %s; want %s", got, want.Code)
	}
}

func TestMountCallErrors(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		want    codes.Code
		wantMsg string
	}{
		{name: "NotFound kept", err: status.Error(codes.NotFound, "secret db not found"), want: codes.NotFound, wantMsg: "secret db not found"},
		{name: "PermissionDenied kept", err: status.Error(codes.PermissionDenied, "denied"), want: codes.PermissionDenied, wantMsg: "denied"},
		{name: "InvalidArgument kept", err: status.Error(codes.InvalidArgument, "bad objects"), want: codes.InvalidArgument, wantMsg: "bad objects"},
		{name: "Unknown becomes Internal", err: status.Error(codes.Unknown, "boom"), want: codes.Internal, wantMsg: "boom"},
		{name: "plain error becomes Internal", err: errors.New("plain failure"), want: codes.Internal, wantMsg: "plain failure"},
		{name: "provider's own DeadlineExceeded kept", err: status.Error(codes.DeadlineExceeded, "store timed out"), want: codes.DeadlineExceeded, wantMsg: "store timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mountWith(t, Config{}, func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
				return nil, tt.err
			})
			checkProviderError(t, err, &ProviderError{Provider: "aws", Code: tt.want, Message: tt.wantMsg})
			if !strings.Contains(err.Error(), `provider "aws" failed`) {
				t.Errorf("error %q does not name the provider", err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v matches context.DeadlineExceeded; the caller's deadline did not pass", err)
			}
		})
	}
}

func TestMountResponseErrorCode(t *testing.T) {
	tests := []struct {
		errorCode string
		want      codes.Code
	}{
		{errorCode: "NotFound", want: codes.NotFound},
		{errorCode: "PermissionDenied", want: codes.PermissionDenied},
		{errorCode: "InvalidArgument", want: codes.InvalidArgument},
		{errorCode: "ResourceExhausted", want: codes.ResourceExhausted},
		{errorCode: "Unavailable", want: codes.Unavailable},
		{errorCode: "Unknown", want: codes.Internal},
		{errorCode: "OK", want: codes.Internal},
		{errorCode: "notfound", want: codes.Internal},
		{errorCode: "NOT_FOUND", want: codes.Internal},
		{errorCode: "GRPCProviderError", want: codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.errorCode, func(t *testing.T) {
			err := mountWith(t, Config{}, func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
				resp := okResponse()
				resp.Error = &v1alpha1.Error{Code: tt.errorCode}
				return resp, nil
			})
			checkProviderError(t, err, &ProviderError{Provider: "aws", Code: tt.want, ErrorCode: tt.errorCode})
			if want := fmt.Sprintf("%q", tt.errorCode); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain the error code %s", err, want)
			}
		})
	}
}

func TestMountMissingObjectVersion(t *testing.T) {
	err := mountWith(t, Config{}, func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return &v1alpha1.MountResponse{Files: []*v1alpha1.File{{Path: "a", Mode: 0o644, Contents: []byte("x")}}}, nil
	})
	if !errors.Is(err, ErrInvalidResponse) {
		t.Fatalf("Mount() error = %v; want ErrInvalidResponse", err)
	}
	if !strings.Contains(err.Error(), "object_version") || !strings.Contains(err.Error(), `"aws"`) {
		t.Errorf("error %q does not name the provider and object_version", err)
	}
}

// blockUntilDone answers Mount only when the call's context ends, long after
// any deadline a test sets.
func blockUntilDone(ctx context.Context, _ *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Minute):
		return okResponse(), nil
	}
}

func TestMountContextEnds(t *testing.T) {
	tests := []struct {
		name     string
		timeout  time.Duration
		callerCx func(t *testing.T) context.Context
		wantErr  error
		wantCode codes.Code
	}{
		{
			name:     "client timeout",
			timeout:  100 * time.Millisecond,
			callerCx: func(t *testing.T) context.Context { return t.Context() },
			wantErr:  context.DeadlineExceeded,
			wantCode: codes.DeadlineExceeded,
		},
		{
			name:    "caller deadline shorter than timeout",
			timeout: time.Hour,
			callerCx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			wantErr:  context.DeadlineExceeded,
			wantCode: codes.DeadlineExceeded,
		},
		{
			name:    "caller cancels",
			timeout: time.Hour,
			callerCx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				time.AfterFunc(100*time.Millisecond, cancel)
				t.Cleanup(cancel)
				return ctx
			},
			wantErr:  context.Canceled,
			wantCode: codes.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tempDir(t)
			serve(t, dir, "aws", &fakeProvider{mount: blockUntilDone})
			c := newClient(t, Config{Dirs: []string{dir}, Timeout: tt.timeout})

			_, err := c.Mount(tt.callerCx(t), "aws", okMountRequest())
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Mount() error = %v; want %v", err, tt.wantErr)
			}
			if got := status.Code(fmt.Errorf("publish: %w", err)); got != tt.wantCode {
				t.Errorf("status.Code(wrapped error) = %s; want %s", got, tt.wantCode)
			}
			if !strings.Contains(err.Error(), `provider "aws"`) {
				t.Errorf("error %q does not name the provider", err)
			}
		})
	}
}

// TestCallCarriesDeadline checks that the provider sees the per-call deadline
// when the caller sets none.
func TestCallCarriesDeadline(t *testing.T) {
	const timeout = 30 * time.Second
	dir := tempDir(t)
	deadlines := make(chan time.Duration, 1)
	serve(t, dir, "aws", &fakeProvider{mount: func(ctx context.Context, _ *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		d, ok := ctx.Deadline()
		if !ok {
			deadlines <- -1
		} else {
			deadlines <- time.Until(d)
		}
		return okResponse(), nil
	}})
	c := newClient(t, Config{Dirs: []string{dir}, Timeout: timeout})

	if _, err := c.Mount(context.Background(), "aws", okMountRequest()); err != nil {
		t.Fatalf("Mount(): %v", err)
	}
	if left := <-deadlines; left <= 0 || left > timeout {
		t.Errorf("provider saw %v left before its deadline; want a deadline within %v", left, timeout)
	}
}

func TestNobodyListening(t *testing.T) {
	dir := tempDir(t)
	bindSocket(t, dir, "aws", true)
	c := newClient(t, Config{Dirs: []string{dir}})

	_, err := c.Mount(t.Context(), "aws", okMountRequest())
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Mount() on a socket nobody listens on: %v (code %s); want Unavailable", err, status.Code(err))
	}
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Code != codes.Unavailable {
		t.Errorf("error %v is not a *ProviderError with code Unavailable", err)
	}
}

func TestMaxRecvSizeExceeded(t *testing.T) {
	big := func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		resp := okResponse()
		resp.Files[0].Contents = make([]byte, 4096)
		return resp, nil
	}
	err := mountWith(t, Config{MaxRecvMsgSize: 1024}, big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("status.Code(%v) = %s; want ResourceExhausted", err, status.Code(err))
	}
	for _, s := range []string{"--provider-max-recv-size", "1024 bytes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}

	// The provider's own ResourceExhausted is not the driver's limit: no hint.
	quota := func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		return nil, status.Error(codes.ResourceExhausted, "quota exceeded")
	}
	if err := mountWith(t, Config{}, quota); strings.Contains(err.Error(), "--provider-max-recv-size") {
		t.Errorf("error %q hints at the receive size for a provider quota error", err)
	}
}

func TestProviderErrorStatus(t *testing.T) {
	tests := []struct {
		name    string
		err     *ProviderError
		want    codes.Code
		wantMsg string
	}{
		{
			name:    "call failure",
			err:     &ProviderError{Provider: "aws", Code: codes.NotFound, Message: "no such secret"},
			want:    codes.NotFound,
			wantMsg: `provider "aws" failed: NotFound: no such secret`,
		},
		{
			name:    "error code",
			err:     &ProviderError{Provider: "vault", Code: codes.Internal, ErrorCode: "GRPCProviderError"},
			want:    codes.Internal,
			wantMsg: `provider "vault" failed with error code "GRPCProviderError"`,
		},
		{name: "Unknown becomes Internal", err: &ProviderError{Provider: "a", Code: codes.Unknown}, want: codes.Internal},
		{name: "OK becomes Internal", err: &ProviderError{Provider: "a", Code: codes.OK}, want: codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.err.GRPCStatus()
			if st.Code() != tt.want {
				t.Errorf("GRPCStatus().Code() = %s; want %s", st.Code(), tt.want)
			}
			if st.Message() != tt.err.Error() {
				t.Errorf("GRPCStatus().Message() = %q; want %q", st.Message(), tt.err.Error())
			}
			if tt.wantMsg != "" && tt.err.Error() != tt.wantMsg {
				t.Errorf("Error() = %q; want %q", tt.err.Error(), tt.wantMsg)
			}
			if !errors.Is(tt.err, ErrProviderFailed) {
				t.Error("ProviderError does not match ErrProviderFailed")
			}
		})
	}
}

// TestMountErrorCodeDetail: a provider built on keymount's kit sends
// error.code as a status detail beside the gRPC code; the client keeps both.
func TestMountErrorCodeDetail(t *testing.T) {
	err := mountWith(t, Config{}, func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
		st, derr := status.New(codes.PermissionDenied, "secret db: AccessDeniedException").WithDetails(&v1alpha1.Error{Code: "AccessDenied"})
		if derr != nil {
			return nil, derr
		}
		return nil, st.Err()
	})
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Code != codes.PermissionDenied || pe.ErrorCode != "AccessDenied" {
		t.Fatalf("err = %#v, want PermissionDenied with error code AccessDenied", err)
	}
	if !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("message %q does not name the error code", err.Error())
	}
}

// TestProviderMessagesAreBounded: a provider that answers with a huge status
// message or error code cannot make the driver repeat it whole.
func TestProviderMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("é", 1<<20)
	c := &Client{maxRecvMsgSize: DefaultMaxRecvMsgSize}
	err := c.callError(t.Context(), "p", "Mount", status.Error(codes.PermissionDenied, huge))
	var pe *ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %T %v", err, err)
	}
	if len(pe.Message) > maxMessageLen || !strings.HasSuffix(pe.Message, "(truncated)") || !utf8.ValidString(pe.Message) {
		t.Fatalf("message of %d bytes (valid UTF-8: %v), want at most %d ending in (truncated)",
			len(pe.Message), utf8.ValidString(pe.Message), maxMessageLen)
	}
	if len(bound(strings.Repeat("x", 1000), maxErrorCodeLen)) > maxErrorCodeLen {
		t.Fatal("error code not bounded")
	}
	if got := bound("short", maxMessageLen); got != "short" {
		t.Fatalf("short message changed: %q", got)
	}
}
