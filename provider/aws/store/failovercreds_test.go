package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keymount/keymount/provider/server"
)

// failingCredentials stands for failover credentials whose STS is down.
type failingCredentials struct{}

func (failingCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, fmt.Errorf("assuming role at the STS of us-west-2: %w", server.Mark(errors.New("connection refused"), server.ErrUnavailable))
}

// TestFailoverCredentials: calls to the failover region are signed with the
// failover region's credentials, calls to the primary region with the
// primary's; failover credentials that cannot be had make the objects
// Unavailable, not Internal.
func TestFailoverCredentials(t *testing.T) {
	fake := newFakeAWS(t)
	fake.fault = func(c fakeCall) (int, any) {
		if c.Region == "us-east-1" {
			return apiError("503")
		}
		return 0, nil
	}
	s := fastStore(fake.url, nil)
	req := request("role", objects(2, 2))
	req.FailoverRegion = "us-west-2"
	req.Credentials = credentials.NewStaticCredentialsProvider("AKIDPRIMARY", "secret", "")
	req.FailoverCredentials = credentials.NewStaticCredentialsProvider("AKIDFAILOVER", "secret", "")
	if _, err := s.Fetch(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	keys := map[string]map[string]bool{}
	for _, c := range fake.calls {
		if keys[c.Region] == nil {
			keys[c.Region] = map[string]bool{}
		}
		keys[c.Region][c.AccessKey] = true
	}
	fake.mu.Unlock()
	if len(keys["us-east-1"]) != 1 || !keys["us-east-1"]["AKIDPRIMARY"] || len(keys["us-west-2"]) != 1 || !keys["us-west-2"]["AKIDFAILOVER"] {
		t.Errorf("access keys by region: %v", keys)
	}

	fake.reset()
	req = request("role-2", objects(1, 1))
	req.FailoverRegion = "us-west-2"
	req.FailoverCredentials = failingCredentials{}
	_, err := s.Fetch(t.Context(), req)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("failover credentials unavailable: %v (code %v), want Unavailable", err, status.Code(err))
	}
}
