package identity

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestIdentityRedacts(t *testing.T) {
	id := &Identity{Key: "podidentity:ns/sa", Credentials: provider{creds: aws.Credentials{
		AccessKeyID:     agentKeyID,
		SecretAccessKey: agentSecret,
		SessionToken:    agentSession,
		Source:          podIdentitySource,
		CanExpire:       true,
		Expires:         time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{id, *id, id.Credentials} {
			out := fmt.Sprintf(verb, v)
			for _, secret := range []string{agentSecret, agentSession} {
				if strings.Contains(out, secret) {
					t.Errorf("Sprintf(%s, %T) = %q leaks a secret", verb, v, out)
				}
			}
		}
	}
	if out := id.String(); !strings.Contains(out, "podidentity:ns/sa") || !strings.Contains(out, "2030-01-02T03:04:05Z") {
		t.Errorf("String() = %q, want the key and expiry", out)
	}
}
