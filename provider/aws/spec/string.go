package spec

import (
	"fmt"
	"slices"
	"strings"
)

// String prints the Spec with the token values redacted: only the audiences
// are shown. It has a value receiver so that a Spec printed by value is
// redacted too.
func (s Spec) String() string {
	auds := make([]string, 0, len(s.Tokens))
	for aud := range s.Tokens {
		auds = append(auds, aud)
	}
	slices.Sort(auds)
	var b strings.Builder
	fmt.Fprintf(&b, "Spec{Region: %q, FailoverRegion: %q, PathTranslation: %q, UsePodIdentity: %t, AddressType: %q, ",
		s.Region, s.FailoverRegion, s.PathTranslation, s.UsePodIdentity, s.AddressType)
	if s.AssumeRoleARN != "" {
		fmt.Fprintf(&b, "AssumeRoleARN: %q, ", s.AssumeRoleARN)
	}
	fmt.Fprintf(&b, "Namespace: %q, ServiceAccount: %q, PodName: %q, PodUID: %q, Tokens: <%d redacted, audiences %q>, Objects: [",
		s.Namespace, s.ServiceAccount, s.PodName, s.PodUID, len(s.Tokens), auds)
	for i, o := range s.Objects {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%+v", o)
	}
	b.WriteString("]}")
	return b.String()
}

// GoString redacts %#v the same way as %v.
func (s Spec) GoString() string { return s.String() }

// String prints the failover object (it holds no secret).
func (f *Failover) String() string {
	if f == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{Name: %q, Version: %q, VersionLabel: %q}", f.Name, f.Version, f.VersionLabel)
}
