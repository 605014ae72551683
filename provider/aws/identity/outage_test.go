package identity

import (
	"net/http"
	"sync"
	"testing"
)

// fakeOutages is a RegionOutages that never forgets.
type fakeOutages struct {
	mu   sync.Mutex
	down map[string]bool
}

func (f *fakeOutages) RegionDown(region string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down[region]
}

func (f *fakeOutages) MarkRegionDown(region string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down[region] = true
}

var _ RegionOutages = (*fakeOutages)(nil)

// TestIRSADownRegionSTSSkipped: when the mount's region's STS cannot be
// reached and the failover region's serves, the region is reported down;
// a new identity of a class with that failover region then goes to the
// failover region's STS at once, never to the down one.
func TestIRSADownRegionSTSSkipped(t *testing.T) {
	sts := &regionalSTS{down: map[string]bool{"us-east-1": true}, calls: map[string]int{}}
	outages := &fakeOutages{down: map[string]bool{}}
	r := New(Config{HTTPClient: &http.Client{Transport: sts}, Outages: outages},
		&fakeServiceAccounts{roles: map[string]string{"ns/sa1": roleA, "ns/sa2": roleB}})
	mount := func(sa string) {
		t.Helper()
		s := irsaSpec("ns", sa, "p-"+sa)
		s.Region, s.FailoverRegion = "us-east-1", "us-west-2"
		id, err := r.For(t.Context(), s)
		if err != nil {
			t.Fatalf("%s: %v", sa, err)
		}
		if creds, _ := id.Credentials.Retrieve(t.Context()); creds.AccessKeyID != "AKID-us-west-2" {
			t.Errorf("%s: credentials %s, want the failover region's STS's", sa, creds.AccessKeyID)
		}
	}

	mount("sa1")
	if !outages.RegionDown("us-east-1") {
		t.Fatal("us-east-1 not reported down after its STS failed and us-west-2's served")
	}
	east := sts.count("us-east-1")
	if east == 0 || sts.count("us-west-2") != 1 {
		t.Fatalf("first identity: %d calls to us-east-1, %d to us-west-2; want some and 1", east, sts.count("us-west-2"))
	}

	mount("sa2")
	if got := sts.count("us-east-1"); got != east {
		t.Errorf("second identity: %d more calls to the down region's STS, want 0", got-east)
	}
	if got := sts.count("us-west-2"); got != 2 {
		t.Errorf("second identity: %d calls in all to us-west-2, want 2", got)
	}
	if outages.RegionDown("us-west-2") {
		t.Error("the failover region was reported down")
	}
}
