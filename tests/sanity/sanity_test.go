package sanity_test

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"
	"google.golang.org/grpc"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/tests/harness"
)

const (
	className  = "sanity"
	objectName = "token"
)

// skipControllerSpecs skips the specs of the Controller services. keymount
// is a node-only driver of inline volumes and advertises no
// CONTROLLER_SERVICE; those specs would only exercise the inline volume
// stand-in (volumesource_test.go).
const skipControllerSpecs = `\[Controller Server\]`

// mustPass are Node specs that need a published volume. They have to run and
// pass: a change that made them skip (say, the stand-in breaking) must not go
// unnoticed.
var mustPass = []string{
	"Node Service NodeUnpublishVolume should remove target path",
	"Node Service NodeGetVolumeStats should fail when volume does not exist on the specified path",
	"Node Service NodeGetVolumeStats should fail when volume is not found",
	"Identity Service Probe should return appropriate information",
}

// TestSanity runs csi-sanity against the driver's socket. Ginkgo prints its
// summary ("Ran N of M Specs ... Passed | Failed | Pending | Skipped") at
// the end of the output; a failed spec fails the test through RunSpecs.
func TestSanity(t *testing.T) {
	h := harness.Start(t, harness.Options{})
	h.WriteObject(objectName, "sanity-token-value")
	h.WriteClass(className, harness.ObjectsYAML(objectName))

	// TargetPath is the parent csi-sanity creates before each spec and
	// publishes into as <TargetPath>/target; put it where kubelet would.
	pod := "5a9f5d0e-0b1c-4f3e-9d2a-7c1e2f3a4b5c"
	parent := filepath.Join(h.TargetBase, "pods", pod, "volumes", "kubernetes.io~csi")
	if err := os.MkdirAll(parent, 0o750); err != nil {
		t.Fatal(err)
	}
	cfg := sanity.NewTestConfig()
	cfg.Address = h.Endpoint
	cfg.TargetPath = filepath.Join(parent, "sanity")
	cfg.StagingPath = filepath.Join(h.Dir, "staging") // unused: no STAGE_UNSTAGE_VOLUME
	// Kubelet's read-only flag and target path (kubelet_test.go).
	kubelet := newKubeletPaths(cfg.TargetPath)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(kubelet.intercept))
	cfg.CheckPath = kubelet.checkPath
	cfg.ControllerAddress = startInlineVolumes(t, h, kubelet.kubeletTarget)
	cfg.TestVolumeParameters = map[string]string{driver.AttrClass: className}

	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	var report types.Report
	ginkgo.ReportAfterSuite("keymount sanity summary", func(r ginkgo.Report) { report = r })

	suiteCfg, reporterCfg := ginkgo.GinkgoConfiguration()
	suiteCfg.SkipStrings = append(suiteCfg.SkipStrings, skipControllerSpecs)
	ginkgo.RunSpecs(t, "keymount CSI sanity", suiteCfg, reporterCfg)
	sc.Finalize()

	checkReport(t, report)
	checkKubeletTarget(t, h, kubelet)
}

// checkKubeletTarget checks that the specs published and unpublished at the
// kubelet target the interceptor mapped csi-sanity's to, so that the
// must-pass specs tested the driver's real target, and that nothing of it is
// left: no mount below the kubelet root, no target directory.
func checkKubeletTarget(t *testing.T, h *harness.Harness, k *kubeletPaths) {
	t.Helper()
	if k.published.Load() == 0 || k.unpublished.Load() == 0 {
		t.Errorf("%d publishes and %d unpublishes at %s: the kubelet stand-in mapped none",
			k.published.Load(), k.unpublished.Load(), k.kubeletTarget)
	}
	ms, err := harness.Mounts(h.TargetBase)
	if err != nil {
		t.Fatalf("read mount table: %v", err)
	}
	for _, m := range ms {
		t.Errorf("left mounted after the suite: %s (%s)", m.Mountpoint, m.FSType)
	}
	if _, err := os.Lstat(k.kubeletTarget); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s still exists after the suite (lstat: %v)", k.kubeletTarget, err)
	}
}

// checkReport fails the test when no spec passed, when a spec failed (RunSpecs
// has already failed t then, this says which) or when a must-pass spec did
// not run.
func checkReport(t *testing.T, r types.Report) {
	t.Helper()
	var passed, failed, skipped []string
	skipReasons := map[string]int{}
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		name := s.FullText()
		switch {
		case s.State.Is(types.SpecStatePassed):
			passed = append(passed, name)
		case s.State.Is(types.SpecStateSkipped | types.SpecStatePending):
			skipped = append(skipped, name)
			skipReasons[skipReason(s)]++
		default:
			failed = append(failed, name)
		}
	}
	t.Logf("csi-sanity: %d passed, %d failed, %d skipped or pending", len(passed), len(failed), len(skipped))
	for _, reason := range slices.Sorted(maps.Keys(skipReasons)) {
		t.Logf("  %3d skipped: %s", skipReasons[reason], reason)
	}
	if len(failed) > 0 {
		t.Errorf("failed specs:\n  %s", strings.Join(failed, "\n  "))
	}
	if len(passed) == 0 {
		t.Errorf("no csi-sanity spec passed: the suite did not run")
	}
	for _, name := range mustPass {
		if !slices.Contains(passed, name) {
			t.Errorf("spec %q did not run and pass", name)
		}
	}
}

// skipReason says why a spec did not run: its Skip message, or how it was
// filtered out.
func skipReason(s types.SpecReport) string {
	switch {
	case s.State.Is(types.SpecStatePending):
		return "pending in csi-sanity"
	case s.Failure.Message != "":
		return s.Failure.Message
	case strings.Contains(s.FullText(), "[Controller Server]"):
		return "Controller spec, filtered out: node-only driver"
	default:
		return "filtered out"
	}
}
