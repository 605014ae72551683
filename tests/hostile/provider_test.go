package hostile_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/v1alpha1"
	"github.com/keymount/keymount/tests/harness"
)

// TestProviderModeOutOfRangeRefused: a file mode that is negative or has
// bits beyond 0777 (setuid, setgid, sticky, anything wider) is refused with
// InvalidArgument naming the file, never masked into something the volume
// would then hold; on a republish the pod keeps its files.
func TestProviderModeOutOfRangeRefused(t *testing.T) {
	modes := []int32{-1, -0o644, 0o1000, 0o4755, 0o2755, 0o1777, 0o10644, math.MaxInt32, math.MinInt32}
	for _, mode := range modes {
		name := "mode-" + strconv.FormatInt(int64(mode), 8)
		bad := &v1alpha1.File{Path: "dir/bad-mode-file", Mode: mode, Contents: []byte("x")}
		t.Run(name+"/first-publish", func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(fileOf("ok", "v1"), bad))
			v := n.NewVolume("secrets")
			assertCode(t, n.publish(t, v), codes.InvalidArgument, strconv.Quote(bad.Path))
			assertNotPublished(t, n.Harness, v)
			assertStateEmpty(t, n.Harness)
		})
		t.Run(name+"/republish", func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(fileOf("ok", "v1")))
			v := n.NewVolume("secrets")
			n.mustPublish(t, v)
			n.prov.set(answer(fileOf("ok", "v2"), bad))
			n.mustPublish(t, v)
			assertShows(t, v.Target, map[string]string{"ok": "v1"})
			if rec, err := n.Record(v.ID); err != nil || rec == nil || !strings.Contains(rec.LastError, bad.Path) {
				t.Errorf("record after a refused mode: %+v (%v), want lastError naming %s", rec, err, bad.Path)
			}
		})
	}
}

// TestProviderModesInRangeKept: modes from 0 to 0777 are written as given
// (0 meaning the default 0644), the boundaries included.
func TestProviderModesInRangeKept(t *testing.T) {
	n := startNode(t, harness.Options{})
	want := map[string]os.FileMode{"all": 0o777, "owner-read": 0o400, "none": 0o644, "group": 0o640}
	files := []*v1alpha1.File{
		{Path: "all", Mode: 0o777, Contents: []byte("a")},
		{Path: "owner-read", Mode: 0o400, Contents: []byte("b")},
		{Path: "none", Mode: 0, Contents: []byte("c")},
		{Path: "group", Mode: 0o640, Contents: []byte("d")},
	}
	n.prov.set(answer(files...))
	v := n.NewVolume("secrets")
	n.mustPublish(t, v)
	for name, mode := range want {
		fi, err := os.Stat(filepath.Join(v.Target, name))
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode(), err, mode)
		}
	}
}

// TestProviderErrorMessageTruncated: a provider error message of 1 MiB
// (as a status message, or as MountResponse.error.code) reaches kubelet
// cut to 4 KiB with a marker, keeping the provider's code; the driver's log
// and the volume record carry no more of it than that.
func TestProviderErrorMessageTruncated(t *testing.T) {
	const filler = 'Q'
	huge := strings.Repeat(string(filler), 1<<20)
	cases := []struct {
		name string
		code codes.Code
		fail script
	}{
		{"status-message", codes.PermissionDenied, func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			return nil, status.Error(codes.PermissionDenied, huge)
		}},
		{"error-code", codes.Internal, func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			return &v1alpha1.MountResponse{Error: &v1alpha1.Error{Code: huge}}, nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/first-publish", func(t *testing.T) {
			n := startNode(t, harness.Options{})
			logs := captureLogs(t)
			n.prov.set(tc.fail)
			v := n.NewVolume("secrets")
			err := n.publish(t, v)
			assertCode(t, err, tc.code, "truncated")
			if msg := status.Convert(err).Message(); len(msg) > 4<<10 {
				t.Errorf("status message of %d bytes, want at most 4 KiB", len(msg))
			}
			assertNotPublished(t, n.Harness, v)
			logs.assertNoRunLonger(t, filler, 4<<10)
		})
		t.Run(tc.name+"/republish", func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(fileOf("ok", "v1")))
			v := n.NewVolume("secrets")
			n.mustPublish(t, v)
			logs := captureLogs(t)
			n.prov.set(tc.fail)
			n.mustPublish(t, v)
			assertShows(t, v.Target, map[string]string{"ok": "v1"})
			rec, err := n.Record(v.ID)
			if err != nil || rec == nil {
				t.Fatalf("record after a failed refresh: %v, %v", rec, err)
			}
			if rec.LastError == "" || len(rec.LastError) > 4<<10 {
				t.Errorf("record lastError of %d bytes, want the failure cut to at most 4 KiB", len(rec.LastError))
			}
			logs.assertNoRunLonger(t, filler, 4<<10)
		})
	}
}

// TestProviderHangsPastDeadline: a provider that never answers is given up
// on at the driver's provider timeout, long before kubelet's deadline: the
// call is DeadlineExceeded, the provider sees its call canceled, and no
// mount is left. A republish against it keeps the files and succeeds.
func TestProviderHangsPastDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	hang := func(saw chan<- error) script {
		return func(ctx context.Context, _ *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			<-ctx.Done()
			saw <- ctx.Err()
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	t.Run("first-publish", func(t *testing.T) {
		n := startNode(t, harness.Options{ProviderTimeout: timeout})
		saw := make(chan error, 8)
		n.prov.set(hang(saw))
		v := n.NewVolume("secrets")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // kubelet's deadline
		defer cancel()
		_, err := n.Node.NodePublishVolume(ctx, n.PublishRequest(v.ID, v.Target, className, true))
		assertCode(t, err, codes.DeadlineExceeded)
		if ctx.Err() != nil {
			t.Errorf("the driver waited for kubelet's deadline, not its own provider timeout")
		}
		assertProviderCanceled(t, saw)
		assertNotPublished(t, n.Harness, v)
		assertStateEmpty(t, n.Harness)
	})
	t.Run("republish", func(t *testing.T) {
		n := startNode(t, harness.Options{ProviderTimeout: timeout})
		n.prov.set(answer(fileOf("ok", "v1")))
		v := n.NewVolume("secrets")
		n.mustPublish(t, v)
		saw := make(chan error, 8)
		n.prov.set(hang(saw))
		n.mustPublish(t, v)
		assertProviderCanceled(t, saw)
		assertShows(t, v.Target, map[string]string{"ok": "v1"})
	})
}

// assertProviderCanceled waits for the hanging provider to see its call end.
func assertProviderCanceled(t *testing.T, saw <-chan error) {
	t.Helper()
	select {
	case err := <-saw:
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Errorf("provider call ended with %v", err)
		}
	case <-time.After(waitLimit):
		t.Errorf("the provider's call was not canceled within %s", waitLimit)
	}
}

// TestProviderResponseTooLarge: a 10 MiB response, above the driver's
// receive limit, is ResourceExhausted naming the flag that raises the
// limit, and leaves no mount.
func TestProviderResponseTooLarge(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answer(fileOf("big", strings.Repeat("b", 10<<20))))
	v := n.NewVolume("secrets")
	assertCode(t, n.publish(t, v), codes.ResourceExhausted, "--provider-max-recv-size")
	assertNotPublished(t, n.Harness, v)
	assertStateEmpty(t, n.Harness)
}

// TestProviderMalformedAnswers: answers that break the contract other than
// through file names fail a first publish with a code that is never Unknown
// and leave no mount.
func TestProviderMalformedAnswers(t *testing.T) {
	cases := map[string]struct {
		answer script
		code   codes.Code
	}{
		"no-object-version": {func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			return &v1alpha1.MountResponse{Files: []*v1alpha1.File{fileOf("ok", "v1")}}, nil
		}, codes.Internal},
		"plain-error": {func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			return nil, errors.New("a provider bug") // gRPC sends it as Unknown
		}, codes.Internal},
		"unavailable": {func(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
			return nil, status.Error(codes.Unavailable, "store down")
		}, codes.Unavailable},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(tc.answer)
			v := n.NewVolume("secrets")
			assertCode(t, n.publish(t, v), tc.code)
			assertNotPublished(t, n.Harness, v)
		})
	}
}

// TestProviderEmptyFileList: a provider answering with no files (legacy
// providers write the files themselves) gets a published, empty volume:
// the call succeeds and nothing is written into it.
func TestProviderEmptyFileList(t *testing.T) {
	n := startNode(t, harness.Options{})
	n.prov.set(answer())
	v := n.NewVolume("secrets")
	n.mustPublish(t, v)
	if m, err := harness.MountAt(v.Target); err != nil || m == nil || !harness.HasOption(m, "ro") {
		t.Fatalf("target after publishing no files: mount %+v (%v), want a read-only mount", m, err)
	}
	if des, err := os.ReadDir(v.Target); err != nil || len(des) != 0 {
		t.Errorf("volume of a provider with no files holds %d entries (%v), want none", len(des), err)
	}
	if rec, err := n.Record(v.ID); err != nil || rec == nil || len(rec.Objects) == 0 {
		t.Errorf("record: %+v (%v), want the provider's objects", rec, err)
	}
	n.mustUnpublish(t, v)
	assertNotPublished(t, n.Harness, v)
}

// TestHostileProviderNameRefused: a class whose spec.provider is not a
// provider name (a path, a traversal back into the provider directory, too
// long) is FailedPrecondition, and no socket is dialled: not even the one
// "../providers/hostile" would reach if it were joined to the directory.
func TestHostileProviderNameRefused(t *testing.T) {
	names := []string{"../providers/" + providerName, "/" + providerName, providerName + "/x", "..", strings.Repeat("p", 31), "a.b"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			n := startNode(t, harness.Options{})
			n.prov.set(answer(fileOf("ok", "v1")))
			n.WriteClassFor(className, name, nil)
			v := n.NewVolume("secrets")
			assertCode(t, n.publish(t, v), codes.FailedPrecondition)
			if calls := n.prov.calls.Load(); calls != 0 {
				t.Errorf("provider name %q reached the provider socket (%d calls)", name, calls)
			}
			assertNotPublished(t, n.Harness, v)
		})
	}
}
