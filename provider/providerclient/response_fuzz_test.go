package providerclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/keymount/keymount/internal/unixsocket/sockettest"
	"github.com/keymount/keymount/provider/v1alpha1"
)

// wireCodec is the server's codec: it sends the Mount response bytes the
// test set, as they are, so that the client decodes whatever a provider
// could put on the wire.
type wireCodec struct {
	raw *atomic.Pointer[[]byte]
}

func (c wireCodec) Marshal(v any) ([]byte, error) {
	if _, ok := v.(*v1alpha1.MountResponse); ok {
		return bytes.Clone(*c.raw.Load()), nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("wireCodec: cannot marshal %T", v)
	}
	return proto.Marshal(m)
}

func (wireCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("wireCodec: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data, m)
}

func (wireCodec) Name() string { return "proto" }

// wireServer answers Mount with an empty response, which wireCodec replaces.
type wireServer struct {
	v1alpha1.UnimplementedCSIDriverProviderServer
}

func (wireServer) Mount(context.Context, *v1alpha1.MountRequest) (*v1alpha1.MountResponse, error) {
	return &v1alpha1.MountResponse{}, nil
}

// wireProvider is a provider on a real unix socket whose Mount answers with
// the bytes last passed to send, and a Client for it.
type wireProvider struct {
	raw    atomic.Pointer[[]byte]
	client *Client
}

const fuzzProvider = "fuzz"

func newWireProvider(f *testing.F) *wireProvider {
	f.Helper()
	dir := sockettest.Dir(f)
	l, err := net.Listen("unix", filepath.Join(dir, fuzzProvider+".sock"))
	if err != nil {
		f.Fatal(err)
	}
	w := &wireProvider{}
	empty := []byte{}
	w.raw.Store(&empty)
	s := grpc.NewServer(grpc.ForceServerCodec(wireCodec{raw: &w.raw}))
	v1alpha1.RegisterCSIDriverProviderServer(s, wireServer{})
	go func() { _ = s.Serve(l) }()
	f.Cleanup(s.Stop)
	c, err := New(Config{Dirs: []string{dir}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	w.client = c
	return w
}

// checkMount has the provider answer Mount with raw and checks what the
// Client makes of it: a response it cannot decode is an Internal provider
// failure; one carrying error.code is a *ProviderError with that code (cut to
// maxErrorCodeLen) and a gRPC code other than Unknown or OK; one without
// object_version is ErrInvalidResponse; anything else comes back unchanged.
// No error shows a file's contents or more than the client's bounds.
func (w *wireProvider) checkMount(t *testing.T, raw []byte) {
	t.Helper()
	w.raw.Store(&raw)
	got, err := w.client.Mount(t.Context(), fuzzProvider, okMountRequest())
	if err == nil && got == nil {
		t.Fatal("Mount returned neither a response nor an error")
	}
	if err != nil && got != nil {
		t.Fatalf("Mount returned %v with error %v", got, err)
	}
	if err != nil {
		checkBounded(t, err)
	}
	sent := &v1alpha1.MountResponse{}
	if uerr := proto.Unmarshal(raw, sent); uerr != nil {
		if !errors.Is(err, ErrProviderFailed) || status.Code(err) != codes.Internal {
			t.Fatalf("undecodable response (%v): Mount error = %v (code %v), want an Internal provider failure", uerr, err, status.Code(err))
		}
		return
	}
	if err != nil {
		checkNoContents(t, err, sent)
	}
	if code := sent.GetError().GetCode(); code != "" {
		checkErrorCode(t, err, code)
		return
	}
	if len(sent.GetObjectVersion()) == 0 {
		if !errors.Is(err, ErrInvalidResponse) {
			t.Fatalf("no object_version: Mount error = %v, want ErrInvalidResponse", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("valid response %v: Mount error = %v", sent, err)
	}
	if !proto.Equal(got, sent) {
		t.Fatalf("Mount returned %v, provider sent %v", got, sent)
	}
}

// checkErrorCode checks the error of a response carrying error.code.
func checkErrorCode(t *testing.T, err error, code string) {
	t.Helper()
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Provider != fuzzProvider || pe.ErrorCode != bound(code, maxErrorCodeLen) {
		t.Fatalf("error.code %q: Mount error = %#v, want a *ProviderError with that code, bounded", code, err)
	}
	if pe.Code != codeFromName(code) || pe.Code == codes.OK || pe.Code == codes.Unknown {
		t.Errorf("error.code %q: gRPC code %v", code, pe.Code)
	}
	if status.Code(err) != pe.Code {
		t.Errorf("error.code %q: status code %v, want %v", code, status.Code(err), pe.Code)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", pe.ErrorCode)) {
		t.Errorf("error %q does not name error.code %q", err, pe.ErrorCode)
	}
}

// checkBounded fails when a *ProviderError repeats more of the provider's
// error code or status message than the client's bounds allow.
func checkBounded(t *testing.T, err error) {
	t.Helper()
	var pe *ProviderError
	if errors.As(err, &pe) && (len(pe.ErrorCode) > maxErrorCodeLen || len(pe.Message) > maxMessageLen) {
		t.Fatalf("error code of %d bytes, message of %d: beyond %d and %d", len(pe.ErrorCode), len(pe.Message), maxErrorCodeLen, maxMessageLen)
	}
}

// checkNoContents fails when err shows the contents of a file of resp. Short
// contents, and contents that also appear in a field an error may name, do
// not count.
func checkNoContents(t *testing.T, err error, resp *v1alpha1.MountResponse) {
	t.Helper()
	named := fuzzProvider + "\x00" + resp.GetError().GetCode()
	for _, f := range resp.GetFiles() {
		c := string(f.GetContents())
		if len(c) >= 6 && !strings.Contains(named, c) && strings.Contains(err.Error(), c) {
			t.Fatalf("error %q shows the contents of %q", err, f.GetPath())
		}
	}
}

// FuzzMountResponse builds a Mount response from fuzzed fields: versions is
// "id=version" lines, paths one file path a line, each file with mode and
// contents.
func FuzzMountResponse(f *testing.F) {
	f.Add("", "secret/db=3", "db/password", int32(0o644), []byte("s3cr3t-password"))
	f.Add("", "a=1\nb=", "a\nb/c", int32(0o600), []byte("x"))
	f.Add("", "", "a", int32(0o644), []byte("no object_version here"))
	f.Add("NotFound", "a=1", "a", int32(0o644), []byte("leaked-secret"))
	f.Add("PermissionDenied", "", "", int32(0), []byte{})
	f.Add("Unknown", "a=1", "", int32(0), []byte{})
	f.Add("OK", "a=1", "", int32(0), []byte{})
	f.Add("GRPCProviderError", "a=1", "", int32(0), []byte{})
	f.Add("not_found", "", "", int32(0), []byte{})
	f.Add("", "=", "../../etc/passwd\n/abs\n..data/x", int32(-1), []byte("root:x:0:0"))
	f.Add("", "a=1", "a\x00b", int32(0o4777), []byte{0, 1, 2})
	f.Add("", "\xff=\xfe", "\xff", int32(0o644), []byte("invalid utf-8 in strings"))
	w := newWireProvider(f)
	f.Fuzz(func(t *testing.T, errorCode, versions, paths string, mode int32, contents []byte) {
		resp := &v1alpha1.MountResponse{}
		if errorCode != "" {
			resp.Error = &v1alpha1.Error{Code: errorCode}
		}
		if versions != "" {
			for line := range strings.SplitSeq(versions, "\n") {
				id, version, _ := strings.Cut(line, "=")
				resp.ObjectVersion = append(resp.ObjectVersion, &v1alpha1.ObjectVersion{Id: id, Version: version})
			}
		}
		if paths != "" {
			for p := range strings.SplitSeq(paths, "\n") {
				resp.Files = append(resp.Files, &v1alpha1.File{Path: p, Mode: mode, Contents: contents})
			}
		}
		// Invalid UTF-8 in a string field fails here, as it would in a
		// provider written in Go; the wire target sends such bytes anyway.
		raw, err := proto.Marshal(resp)
		if err != nil {
			return
		}
		w.checkMount(t, raw)
	})
}

// FuzzMountResponseWire has the provider send fuzzed bytes as its Mount
// response: the client decodes them (proto.Unmarshal into MountResponse)
// and checks the result.
func FuzzMountResponseWire(f *testing.F) {
	for _, resp := range []*v1alpha1.MountResponse{
		okResponse(),
		{},
		{ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "a", Version: "1"}, {Id: "b"}}},
		{Error: &v1alpha1.Error{Code: "NotFound"}},
		{Error: &v1alpha1.Error{}, ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "a"}}},
		{Files: []*v1alpha1.File{{Path: "../x", Mode: -1, Contents: []byte("not-versioned-secret")}}},
		{ObjectVersion: []*v1alpha1.ObjectVersion{{Id: "a"}}, Files: []*v1alpha1.File{{Path: "/abs", Mode: 0x7fffffff}, {Path: "a/b"}}},
	} {
		raw, err := proto.Marshal(resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	// Hand-made wire bytes: a string field with invalid UTF-8 (field 1 of
	// ObjectVersion), a truncated length, an unknown field, a group, a
	// varint mode beyond int32.
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 0xff})
	f.Add([]byte{0x0a, 0x10, 0x0a, 0x01})
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 'a', 0xf8, 0x07, 0x01})
	f.Add([]byte{0x0b, 0x0c})
	f.Add([]byte{0x0a, 0x03, 0x0a, 0x01, 'a', 0x1a, 0x0e, 0x0a, 0x01, 'x', 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x12, 0x05, 0x0a, 0x03, 'O', 'K', '!'})
	w := newWireProvider(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		w.checkMount(t, raw)
	})
}
