package node_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keymount/keymount/tests/maintb"
	"github.com/keymount/keymount/tests/nodeenv"
)

const (
	// tokenAudience is the audience the CSIDriver asks kubelet to mint
	// service-account tokens for.
	tokenAudience = "keymount-node-tier"
	// stsAudience is the audience of the token the AWS provider exchanges
	// (IRSA).
	stsAudience = "sts.amazonaws.com"
)

var (
	setupOnce sync.Once
	setupTB   = maintb.New("node setup")
	setupErr  error
	shared    *nodeenv.Node
	// root and cgroupRoot of the shared node, for the check after it stopped.
	root, cgroupRoot string
	used             atomic.Bool
	forbidden        secrets
)

// TestMain runs the tests on one shared node, then takes it down and checks
// that nothing of it is left: no process, mount, cgroup or directory, and
// no secret value or token in any log its processes wrote.
func TestMain(m *testing.M) {
	code := m.Run()
	if code != 0 {
		setupTB.MarkFailed() // the node's cleanup prints its logs' ends
	}
	setupTB.RunCleanups()
	if used.Load() {
		if left := nodeenv.Leftovers(root, cgroupRoot); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: the node left %s\n", strings.Join(left, "; "))
			code = 1
		}
		if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "FAIL: the node's root %s is still there (%v)\n", root, err)
			code = 1
		}
	}
	if setupTB.Failed() && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// node returns the shared node, starting it on first use. A test calling it
// fails when the node cannot start; it never skips.
func node(t *testing.T) *nodeenv.Node {
	t.Helper()
	used.Store(true)
	setupOnce.Do(func() {
		setupErr = setupTB.Run(func() {
			shared = nodeenv.Start(setupTB, nodeenv.Options{
				TokenAudiences: []string{tokenAudience, stsAudience},
				Deployments:    true, // TestVaultProviderInRealPod's replicas
				ScanLogs:       forbidden.scan,
			})
			root, cgroupRoot = shared.Root, shared.CgroupRoot
		})
	})
	if setupErr != nil {
		t.Fatalf("the node did not start:\n%v", setupErr)
	}
	return shared
}

// secrets are values no log may hold: object contents and tokens.
type secrets struct {
	mu     sync.Mutex
	values map[string]string // value -> what it is
}

// add forbids value in every log; what names it in a failure.
func (s *secrets) add(value, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]string{}
	}
	s.values[value] = what
}

// scan fails when a log holds a forbidden value, or when there is no log
// of the driver to scan.
func (s *secrets) scan(files []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	sawDriver := false
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if nodeenv.IsDriverLog(f) && len(data) > 0 {
			sawDriver = true
		}
		for v, what := range s.values {
			if bytes.Contains(data, []byte(v)) {
				errs = append(errs, fmt.Errorf("%s holds %s", f, what))
			}
		}
	}
	if !sawDriver {
		errs = append(errs, fmt.Errorf("no driver log among %v", files))
	}
	return errors.Join(errs...)
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
