package deploy_test

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	tokenAudiencesPath = "components/token-audiences"
	exampleStart       = "# --- example overlay: kustomization.yaml"
	exampleEnd         = "# --- end of example"
)

// The audiences of keymount's AWS provider (provider/aws/identity).
var awsTokenRequests = []storagev1.TokenRequest{
	{Audience: "pods.eks.amazonaws.com"},
	{Audience: "sts.amazonaws.com"},
}

// wantTokenRequests checks that got is base with exactly the token
// requests want (in any order), every audience once.
func wantTokenRequests(t *testing.T, base, got *storagev1.CSIDriver, want []storagev1.TokenRequest) {
	t.Helper()
	if got == nil {
		t.Fatal("no CSIDriver")
	}
	if got.Name != base.Name {
		t.Errorf("CSIDriver %q, want %q", got.Name, base.Name)
	}
	spec := got.Spec
	spec.TokenRequests = slices.SortedFunc(slices.Values(spec.TokenRequests), func(a, b storagev1.TokenRequest) int {
		return cmp.Compare(a.Audience, b.Audience)
	})
	wantSpec := base.Spec
	wantSpec.TokenRequests = want
	if diff := gocmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("CSIDriver spec (-want +got):\n%s", diff)
	}
}

// documentedExample returns the example overlay in the comments of the
// component at path, uncommented.
func documentedExample(t *testing.T, mem filesys.FileSystem, path string) string {
	t.Helper()
	data, err := mem.ReadFile("/deploy/" + path + "/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), exampleStart+"\n")
	example, _, ok2 := strings.Cut(rest, exampleEnd)
	if !ok || !ok2 {
		t.Fatalf("no %q ... %q block in the component", exampleStart, exampleEnd)
	}
	var b strings.Builder
	for line := range strings.Lines(example) {
		line = strings.TrimPrefix(line, "#")
		b.WriteString(strings.TrimPrefix(line, " "))
	}
	return b.String()
}

// TestTokenAudiencesComponent: the component appends the AWS provider's
// audiences to the CSIDriver and changes nothing else, alone and with the
// other components; the overlay its comments document adds one more.
func TestTokenAudiencesComponent(t *testing.T) {
	mem := deployFS(t)
	base := mustRender(t, mem, "/deploy").csiDriver
	if base == nil || len(base.Spec.TokenRequests) != 0 {
		t.Fatalf("the base CSIDriver requests tokens: %+v", base)
	}
	tests := []struct {
		name       string
		components []string
	}{
		{name: "alone", components: []string{tokenAudiencesPath}},
		{name: "with the others", components: []string{secretSyncPath, tokenAudiencesPath, registrarSidecarPath}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRender(t, mem, overlay(t, mem, tc.components...))
			wantTokenRequests(t, base, r.csiDriver, awsTokenRequests)
		})
	}
	t.Run("documented example", func(t *testing.T) {
		if err := mem.WriteFile("/overlay/kustomization.yaml", []byte(documentedExample(t, mem, tokenAudiencesPath))); err != nil {
			t.Fatal(err)
		}
		r := mustRender(t, mem, "/overlay")
		want := append(slices.Clone(awsTokenRequests), storagev1.TokenRequest{Audience: "vault", ExpirationSeconds: ptr.To[int64](3600)})
		wantTokenRequests(t, base, r.csiDriver, want)
	})
}
