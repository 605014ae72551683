package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/grpc/codes"
)

func TestMark(t *testing.T) {
	if Mark(nil, ErrUnavailable) != nil || Code(nil) != codes.OK {
		t.Fatal("Mark(nil) or Code(nil)")
	}
	if plain := errors.New("x"); !errors.Is(Mark(plain, nil), plain) || Mark(plain, nil).Error() != "x" || Code(plain) != codes.Internal {
		t.Fatal("Mark(err, nil) is not err, or a plain error is not Internal")
	}
	inner := fmt.Errorf("reading: %w", io.ErrUnexpectedEOF)
	err := fmt.Errorf("calling STS: %w", Mark(inner, ErrUnavailable))
	if err.Error() != "calling STS: reading: unexpected EOF" {
		t.Errorf("message = %q, want the inner message unchanged", err.Error())
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("errors.Is does not match both the cause and the kind")
	}
	tests := []struct {
		kind error
		want codes.Code
	}{
		{ErrNotFound, codes.NotFound},
		{ErrPermissionDenied, codes.PermissionDenied},
		{ErrInvalidParameters, codes.InvalidArgument},
		{ErrFailedPrecondition, codes.FailedPrecondition},
		{ErrUnavailable, codes.Unavailable},
	}
	for _, tc := range tests {
		if got := Code(Mark(errors.New("x"), tc.kind)); got != tc.want {
			t.Errorf("Mark(_, %v): code %v, want %v", tc.kind, got, tc.want)
		}
	}
	// A deadline keeps its code when marked with nothing stronger.
	if got := Code(fmt.Errorf("waiting: %w", context.DeadlineExceeded)); got != codes.DeadlineExceeded {
		t.Errorf("deadline: code %v", got)
	}
}
