package v1alpha1

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
)

// The wire format is the contract with every existing driver and provider.
// These tests pin it byte for byte with encodings derived by hand:
// tag = field<<3 | wire type, where wire type 0 is a varint and 2 is
// length-delimited (strings, bytes, embedded messages): 0x0a is field 1,
// 0x12 field 2, 0x1a field 3, 0x22 field 4, 0x2a field 5 (all
// length-delimited) and 0x10 field 2 as a varint.

func TestWireEncoding(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, 200)

	tests := []struct {
		name string
		msg  proto.Message
		want []byte
	}{
		{
			name: "VersionRequest",
			msg:  &VersionRequest{Version: "v1alpha1"},
			want: []byte{
				0x0a, 0x08, 'v', '1', 'a', 'l', 'p', 'h', 'a', '1', // 1 version
			},
		},
		{
			name: "VersionResponse",
			msg:  &VersionResponse{Version: "v1alpha1", RuntimeName: "local", RuntimeVersion: "1.2.3"},
			want: []byte{
				0x0a, 0x08, 'v', '1', 'a', 'l', 'p', 'h', 'a', '1', // 1 version
				0x12, 0x05, 'l', 'o', 'c', 'a', 'l', // 2 runtime_name
				0x1a, 0x05, '1', '.', '2', '.', '3', // 3 runtime_version
			},
		},
		{
			name: "MountRequest",
			msg: &MountRequest{
				Attributes: `{"a":"b"}`,
				Secrets:    `{}`,
				TargetPath: "/t",
				Permission: "420",
				CurrentObjectVersion: []*ObjectVersion{
					{Id: "x", Version: "1"},
					{Id: "y", Version: "2"},
				},
			},
			want: []byte{
				0x0a, 0x09, '{', '"', 'a', '"', ':', '"', 'b', '"', '}', // 1 attributes
				0x12, 0x02, '{', '}', // 2 secrets
				0x1a, 0x02, '/', 't', // 3 target_path
				0x22, 0x03, '4', '2', '0', // 4 permission
				0x2a, 0x06, // 5 current_object_version[0], 6 bytes
				0x0a, 0x01, 'x', //   1 id
				0x12, 0x01, '1', //   2 version
				0x2a, 0x06, // 5 current_object_version[1], 6 bytes
				0x0a, 0x01, 'y', //   1 id
				0x12, 0x01, '2', //   2 version
			},
		},
		{
			name: "MountResponse",
			msg: &MountResponse{
				ObjectVersion: []*ObjectVersion{{Id: "a", Version: "v1"}},
				Error:         &Error{Code: "NotFound"},
				Files: []*File{
					{Path: "a", Mode: 420, Contents: []byte("s3")},
					{Path: "b/c", Mode: -1},
				},
			},
			want: []byte{
				0x0a, 0x07, // 1 object_version[0], 7 bytes
				0x0a, 0x01, 'a', //   1 id
				0x12, 0x02, 'v', '1', //   2 version
				0x12, 0x0a, // 2 error, 10 bytes
				0x0a, 0x08, 'N', 'o', 't', 'F', 'o', 'u', 'n', 'd', //   1 code
				0x1a, 0x0a, // 3 files[0], 10 bytes
				0x0a, 0x01, 'a', //   1 path
				0x10, 0xa4, 0x03, //   2 mode 420 (0644) as a varint
				0x1a, 0x02, 's', '3', //   3 contents
				0x1a, 0x10, // 3 files[1], 16 bytes
				0x0a, 0x03, 'b', '/', 'c', //   1 path
				0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, //   2 mode -1: int32 is sign-extended to a 10-byte varint
			},
		},
		{
			name: "MountResponse with an empty error present",
			msg:  &MountResponse{Error: &Error{}},
			want: []byte{
				0x12, 0x00, // 2 error, present but empty
			},
		},
		{
			name: "ObjectVersion",
			msg:  &ObjectVersion{Id: "db/password", Version: "7"},
			want: []byte{
				0x0a, 0x0b, 'd', 'b', '/', 'p', 'a', 's', 's', 'w', 'o', 'r', 'd', // 1 id
				0x12, 0x01, '7', // 2 version
			},
		},
		{
			name: "Error",
			msg:  &Error{Code: "Internal"},
			want: []byte{
				0x0a, 0x08, 'I', 'n', 't', 'e', 'r', 'n', 'a', 'l', // 1 code
			},
		},
		{
			name: "File",
			msg:  &File{Path: "ü", Mode: 0o600, Contents: []byte{0x00, 0xff}},
			want: []byte{
				0x0a, 0x02, 0xc3, 0xbc, // 1 path, UTF-8 "ü"
				0x10, 0x80, 0x03, // 2 mode 384 (0600)
				0x1a, 0x02, 0x00, 0xff, // 3 contents, arbitrary bytes
			},
		},
		{
			name: "File with a two-byte length",
			msg:  &File{Contents: big},
			want: append([]byte{
				0x1a, 0xc8, 0x01, // 3 contents, length 200 as a varint
			}, big...),
		},
		{
			name: "File zero values are omitted",
			msg:  &File{Path: "a", Mode: 0, Contents: []byte{}},
			want: []byte{
				0x0a, 0x01, 'a', // 1 path; mode 0 and empty contents are not encoded
			},
		},
		{
			name: "empty MountRequest",
			msg:  &MountRequest{},
			want: []byte{},
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("Marshal(%v)\n got % x\nwant % x", tc.msg, got, tc.want)
			}

			back := tc.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(tc.want, back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tc.msg, back, protocmp.Transform()); diff != "" {
				t.Errorf("Unmarshal of the hand-written bytes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMethodNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{CSIDriverProvider_Version_FullMethodName, "/v1alpha1.CSIDriverProvider/Version"},
		{CSIDriverProvider_Mount_FullMethodName, "/v1alpha1.CSIDriverProvider/Mount"},
		{CSIDriverProvider_ServiceDesc.ServiceName, "v1alpha1.CSIDriverProvider"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}

	var got []string
	for _, m := range CSIDriverProvider_ServiceDesc.Methods {
		got = append(got, "/"+CSIDriverProvider_ServiceDesc.ServiceName+"/"+m.MethodName)
	}
	want := []string{"/v1alpha1.CSIDriverProvider/Version", "/v1alpha1.CSIDriverProvider/Mount"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered methods (-want +got):\n%s", diff)
	}
	if n := len(CSIDriverProvider_ServiceDesc.Streams); n != 0 {
		t.Errorf("service has %d streams, want 0", n)
	}
}

// field describes one field as the descriptor must report it.
type field struct {
	Name     string
	Number   int
	Kind     string
	Message  string // full name of the message type, for message fields
	Repeated bool
}

func TestDescriptor(t *testing.T) {
	fd := File_service_proto
	if got := fd.Package(); got != "v1alpha1" {
		t.Errorf("package = %q, want v1alpha1", got)
	}
	if got := fd.Syntax(); got != protoreflect.Proto3 {
		t.Errorf("syntax = %v, want proto3", got)
	}

	// Service and methods.
	if n := fd.Services().Len(); n != 1 {
		t.Fatalf("%d services, want 1", n)
	}
	svc := fd.Services().Get(0)
	if got := svc.FullName(); got != "v1alpha1.CSIDriverProvider" {
		t.Errorf("service = %q", got)
	}
	type method struct{ Name, In, Out, Path string }
	var methods []method
	for i := range svc.Methods().Len() {
		m := svc.Methods().Get(i)
		if m.IsStreamingClient() || m.IsStreamingServer() {
			t.Errorf("method %s is streaming", m.Name())
		}
		methods = append(methods, method{
			Name: string(m.Name()),
			In:   string(m.Input().FullName()),
			Out:  string(m.Output().FullName()),
			Path: "/" + string(svc.FullName()) + "/" + string(m.Name()),
		})
	}
	wantMethods := []method{
		{"Version", "v1alpha1.VersionRequest", "v1alpha1.VersionResponse", "/v1alpha1.CSIDriverProvider/Version"},
		{"Mount", "v1alpha1.MountRequest", "v1alpha1.MountResponse", "/v1alpha1.CSIDriverProvider/Mount"},
	}
	if diff := cmp.Diff(wantMethods, methods); diff != "" {
		t.Errorf("methods (-want +got):\n%s", diff)
	}

	// Messages and every field's name, number, type and cardinality.
	want := map[string][]field{
		"v1alpha1.VersionRequest": {
			{Name: "version", Number: 1, Kind: "string"},
		},
		"v1alpha1.VersionResponse": {
			{Name: "version", Number: 1, Kind: "string"},
			{Name: "runtime_name", Number: 2, Kind: "string"},
			{Name: "runtime_version", Number: 3, Kind: "string"},
		},
		"v1alpha1.MountRequest": {
			{Name: "attributes", Number: 1, Kind: "string"},
			{Name: "secrets", Number: 2, Kind: "string"},
			{Name: "target_path", Number: 3, Kind: "string"},
			{Name: "permission", Number: 4, Kind: "string"},
			{Name: "current_object_version", Number: 5, Kind: "message", Message: "v1alpha1.ObjectVersion", Repeated: true},
		},
		"v1alpha1.MountResponse": {
			{Name: "object_version", Number: 1, Kind: "message", Message: "v1alpha1.ObjectVersion", Repeated: true},
			{Name: "error", Number: 2, Kind: "message", Message: "v1alpha1.Error"},
			{Name: "files", Number: 3, Kind: "message", Message: "v1alpha1.File", Repeated: true},
		},
		"v1alpha1.ObjectVersion": {
			{Name: "id", Number: 1, Kind: "string"},
			{Name: "version", Number: 2, Kind: "string"},
		},
		"v1alpha1.Error": {
			{Name: "code", Number: 1, Kind: "string"},
		},
		"v1alpha1.File": {
			{Name: "path", Number: 1, Kind: "string"},
			{Name: "mode", Number: 2, Kind: "int32"},
			{Name: "contents", Number: 3, Kind: "bytes"},
		},
	}

	got := map[string][]field{}
	for i := range fd.Messages().Len() {
		md := fd.Messages().Get(i)
		var fields []field
		for j := range md.Fields().Len() {
			f := md.Fields().Get(j)
			ff := field{
				Name:     string(f.Name()),
				Number:   int(f.Number()),
				Kind:     f.Kind().String(),
				Repeated: f.Cardinality() == protoreflect.Repeated,
			}
			if f.Message() != nil {
				ff.Message = string(f.Message().FullName())
			}
			if f.HasPresence() && f.Kind() != protoreflect.MessageKind {
				t.Errorf("%s.%s has explicit presence (optional); the contract has none", md.FullName(), f.Name())
			}
			fields = append(fields, ff)
		}
		got[string(md.FullName())] = fields
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}
