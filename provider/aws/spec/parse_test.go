package spec

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const oneObject = `[{objectName: s, objectType: secretsmanager}]`

func TestParseTopLevel(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]string
		want  Spec
	}{{
		name:  "defaults",
		attrs: attrsWith(oneObject, nil),
		want:  Spec{PathTranslation: "_", AddressType: AddressAuto},
	}, {
		name: "everything set",
		attrs: attrsWith(oneObject, map[string]string{
			KeyRegion: "us-east-1", KeyFailoverRegion: "us-west-2", KeyPathTranslation: "-",
			KeyUsePodIdentity: "true", KeyPreferredAddressType: "ipv6",
			KeyPodNamespace: "ns", KeyPodName: "pod", KeyPodUID: "0b5e7a52-1c1b-4c7e-9a43-8d0c1f2e3a4b", KeyServiceAccount: "sa",
			"secretProviderClass": "ignored", "csi.storage.k8s.io/ephemeral": "false",
		}),
		want: Spec{Region: "us-east-1", FailoverRegion: "us-west-2", PathTranslation: "-", UsePodIdentity: true,
			AddressType: AddressIPv6, Namespace: "ns", PodName: "pod", PodUID: "0b5e7a52-1c1b-4c7e-9a43-8d0c1f2e3a4b", ServiceAccount: "sa"},
	}, {
		name:  "path translation off",
		attrs: attrsWith(oneObject, map[string]string{KeyPathTranslation: "FALSE"}),
		want:  Spec{PathTranslation: "", AddressType: AddressAuto},
	}, {
		name:  "pod identity, ipv4, any case",
		attrs: attrsWith(oneObject, map[string]string{KeyUsePodIdentity: "True", KeyPreferredAddressType: "IPv4"}),
		want:  Spec{PathTranslation: "_", UsePodIdentity: true, AddressType: AddressIPv4},
	}, {
		name:  "pod identity, auto",
		attrs: attrsWith(oneObject, map[string]string{KeyUsePodIdentity: "true", KeyPreferredAddressType: "auto"}),
		want:  Spec{PathTranslation: "_", UsePodIdentity: true, AddressType: AddressAuto},
	}, {
		name:  "address type ignored without pod identity",
		attrs: attrsWith(oneObject, map[string]string{KeyUsePodIdentity: "false", KeyPreferredAddressType: "ipv6"}),
		want:  Spec{PathTranslation: "_", AddressType: AddressAuto},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.attrs)
			if diff := cmp.Diff(tt.want, *s, cmpopts.IgnoreFields(Spec{}, "Objects")); diff != "" {
				t.Errorf("Spec (-want +got):\n%s", diff)
			}
			if len(s.Objects) != 1 {
				t.Errorf("got %d objects, want 1", len(s.Objects))
			}
		})
	}
}

func TestParseTopLevelErrors(t *testing.T) {
	tests := []struct {
		name  string
		extra map[string]string
		want  []string
	}{
		{"failover region equals region", map[string]string{KeyRegion: "us-east-1", KeyFailoverRegion: "us-east-1"},
			[]string{`failoverRegion: "us-east-1" is the same as region`}},
		{"bad region", map[string]string{KeyRegion: "us-east-1.evil.com/"}, []string{`region: "us-east-1.evil.com/" is not an AWS region name`}},
		{"bad failover region", map[string]string{KeyFailoverRegion: "-x"}, []string{`failoverRegion: "-x" is not an AWS region name`}},
		{"long path translation", map[string]string{KeyPathTranslation: "__"}, []string{`pathTranslation: "__" is neither "False" nor a single character`}},
		{"backslash path translation", map[string]string{KeyPathTranslation: `\`}, []string{"pathTranslation: \"\\\\\" cannot appear in a file name"}},
		{"bad usePodIdentity", map[string]string{KeyUsePodIdentity: "yes"}, []string{`usePodIdentity: "yes" is not "true" or "false"`}},
		{"bad preferredAddressType", map[string]string{KeyUsePodIdentity: "true", KeyPreferredAddressType: "ipv5"},
			[]string{`preferredAddressType: "ipv5" is not ipv4, ipv6 or auto`}},
		{"all at once", map[string]string{KeyUsePodIdentity: "yes", KeyPathTranslation: "ab", KeyObjects: "[{}]"},
			[]string{"usePodIdentity", "pathTranslation", "objects[0].objectName: is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(attrsWith(oneObject, tt.extra), 0o644)
			wantErrs(t, err, tt.want...)
		})
	}
}

func TestParseDefaultMode(t *testing.T) {
	s, err := Parse(attrsWith(oneObject, nil), 0o440)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Objects[0].Mode; got != 0o440 {
		t.Errorf("Mode = %#o, want the default 0440", got)
	}
	_, err = Parse(attrsWith(oneObject, nil), os.ModeDir|0o755)
	wantErrs(t, err, "default file mode")
}

func TestSetDefaultRegion(t *testing.T) {
	arnObject := `[{objectName: "` + smARN + `"}]`
	tests := []struct {
		name       string
		extra      map[string]string
		nodeRegion string
		wantRegion string
		wantErr    string
	}{
		{"fills the region", nil, "us-east-1", "us-east-1", ""},
		{"keeps the class's region", map[string]string{KeyRegion: "us-east-1"}, "eu-west-1", "us-east-1", ""},
		{"ARN in another region", nil, "eu-west-1", "eu-west-1", `the ARN is in region "us-east-1" but region is "eu-west-1"`},
		{"failover region equals the node's", map[string]string{KeyFailoverRegion: "us-east-1"}, "us-east-1", "us-east-1", "is the same as region"},
		{"unknown node region", nil, "", "", "the node's region is unknown"},
		{"bad node region", nil, "x y", "x y", "node region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, attrsWith(arnObject, tt.extra))
			err := s.SetDefaultRegion(tt.nodeRegion)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("SetDefaultRegion: %v", err)
			}
			if tt.wantErr != "" {
				wantErrs(t, err, tt.wantErr)
			}
			if s.Region != tt.wantRegion {
				t.Errorf("Region = %q, want %q", s.Region, tt.wantRegion)
			}
		})
	}
}

func TestSpecStringRedactsTokens(t *testing.T) {
	s := mustParse(t, attrsWith(`[{objectName: s, objectType: secretsmanager, objectAlias: a, failoverObject: {objectName: f}}]`, map[string]string{
		KeyFailoverRegion: "us-west-2",
		KeyTokens:         `{"sts.amazonaws.com": {"token": "tok-secret-1"}, "pods.eks.amazonaws.com": {"token": "tok-secret-2"}}`,
	}))
	for _, out := range []string{s.String(), fmt.Sprint(s), fmt.Sprint(*s), fmt.Sprintf("%+v", *s), fmt.Sprintf("%#v", s), fmt.Sprintf("%#v", *s)} {
		if strings.Contains(out, "tok-secret") {
			t.Errorf("printed Spec shows a token: %s", out)
		}
		for _, want := range []string{"<2 redacted", "sts.amazonaws.com", `Name: "f"`} {
			if !strings.Contains(out, want) {
				t.Errorf("printed Spec lacks %q: %s", want, out)
			}
		}
	}
}

func TestErrInvalidIsJoined(t *testing.T) {
	_, err := Parse(attrsWith(`[{objectName: a}, {objectName: b}]`, nil), 0o644)
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("error %v does not unwrap to a list", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error does not wrap ErrInvalid")
	}
}

// TestParsePush: a push's attributes are checked as a mount's, but need
// no objects (a push names its objects per item) and ignore the class's.
func TestParsePush(t *testing.T) {
	attrs := map[string]string{
		KeyRegion: "eu-west-1", KeyPodNamespace: "shop", KeyServiceAccount: "pusher",
		KeyTokens: `{"sts.amazonaws.com":{"token":"t","expirationTimestamp":"2030-01-01T00:00:00Z"}}`,
	}
	s, err := ParsePush(attrs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Region != "eu-west-1" || s.Namespace != "shop" || s.ServiceAccount != "pusher" || s.Tokens["sts.amazonaws.com"] != "t" || s.Objects != nil {
		t.Errorf("ParsePush = region %q, %s/%s, objects %v", s.Region, s.Namespace, s.ServiceAccount, s.Objects)
	}
	if _, err := Parse(attrs, 0o644); err == nil {
		t.Error("Parse without objects succeeded: a mount needs them")
	}
	attrs[KeyRegion] = "EU WEST"
	if _, err := ParsePush(attrs); !errors.Is(err, ErrInvalid) {
		t.Errorf("ParsePush of a bad region: %v, want ErrInvalid", err)
	}
}
