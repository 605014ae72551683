package conformance_test

import (
	"os"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/keymount/keymount/driver"
	"github.com/keymount/keymount/tests/harness"
)

func TestProbe(t *testing.T) {
	h := harness.Start(t, harness.Options{})

	probe := func() bool {
		t.Helper()
		resp, err := h.Identity.Probe(t.Context(), &csi.ProbeRequest{})
		if err != nil {
			t.Fatalf("Probe: %v", err)
		}
		if resp.GetReady() == nil {
			t.Fatalf("Probe answered without ready")
		}
		return resp.GetReady().GetValue()
	}
	if !probe() {
		t.Errorf("Probe: not ready while serving with a readable provider directory")
	}

	// Without its provider directory the node cannot mount anything.
	moved := h.ProviderDir + ".away"
	if err := os.Rename(h.ProviderDir, moved); err != nil {
		t.Fatal(err)
	}
	if probe() {
		t.Errorf("Probe: ready without a provider directory")
	}
	if err := os.Rename(moved, h.ProviderDir); err != nil {
		t.Fatal(err)
	}
	if !probe() {
		t.Errorf("Probe: not ready once the provider directory is back")
	}
}

func TestPluginInfo(t *testing.T) {
	h := harness.Start(t, harness.Options{NodeID: "node-a"})

	info, err := h.Identity.GetPluginInfo(t.Context(), &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatalf("GetPluginInfo: %v", err)
	}
	if info.GetName() != driver.DefaultDriverName {
		t.Errorf("driver name %q, want %q (existing pod volumes name it)", info.GetName(), driver.DefaultDriverName)
	}
	ni, err := h.Node.NodeGetInfo(t.Context(), &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "node-a" {
		t.Errorf("NodeGetInfo: %v, %v; want node-a", ni, err)
	}
	caps, err := h.Identity.GetPluginCapabilities(t.Context(), &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("GetPluginCapabilities: %v", err)
	}
	for _, c := range caps.GetCapabilities() {
		if c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
			t.Errorf("node-only driver advertises a controller service")
		}
	}
}
