package store_test

import (
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/keymount/keymount/provider/aws/store"
)

// BenchmarkFetch: 100 pods of one identity mount 10 secrets, then refresh
// them after the freshness window with one secret changed. It reports store
// requests per op (one op = the mount and the refresh of all 100 pods).
func BenchmarkFetch(b *testing.B) {
	fake := newFakeAWS(b)
	clk := clocktesting.NewFakeClock(time.Now())
	const pods = 100
	fetchAll := func(s *store.Store, current map[string]string) {
		var wg sync.WaitGroup
		for range pods {
			wg.Go(func() {
				req := request("role", objects(10, 0))
				req.Current = current
				if _, err := s.Fetch(b.Context(), req); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	fake.reset()
	var mounts, refreshes int
	for i := 0; b.Loop(); i++ {
		s := store.New(store.Config{Endpoint: fake.url, Clock: clk})
		before := fake.count()
		fetchAll(s, nil)
		mounts += fake.count() - before

		fake.set("s0", time.Duration(i+2).String())
		clk.Step(store.DefaultFreshness)
		before = fake.count()
		fetchAll(s, map[string]string{"s0": "1"})
		refreshes += fake.count() - before
	}
	b.ReportMetric(float64(mounts+refreshes)/float64(b.N), "requests/op")
	b.ReportMetric(float64(mounts)/float64(b.N), "mount-requests/op")
	b.ReportMetric(float64(refreshes)/float64(b.N), "refresh-requests/op")
}
