package main

import (
	"maps"
	"testing"
	"time"

	"github.com/keymount/keymount/provider/aws/kubeclient"
)

// TestExistingProviderFlags: the flags of the existing AWS provider's
// manifests and chart parse, with their meaning where keymount has one.
func TestExistingProviderFlags(t *testing.T) {
	cfg := mustParseFlags(t, []string{
		"--provider-volume=/etc/kubernetes/secrets-store-csi-providers",
		"--driver-writes-secrets=false",
		"--qps=20", "--burst=40",
		"--eks-addon-version=v1.0.0-eksbuild.1",
		"--pod-identity-http-timeout=250ms",
	})
	if cfg.server.SocketDir != "/etc/kubernetes/secrets-store-csi-providers" {
		t.Errorf("--provider-volume: socket dir %q", cfg.server.SocketDir)
	}
	if cfg.upstream.qps != 20 || cfg.upstream.burst != 40 || cfg.podIdentityTimeout != 250*time.Millisecond {
		t.Errorf("qps %v burst %d pod identity timeout %v", cfg.upstream.qps, cfg.upstream.burst, cfg.podIdentityTimeout)
	}
	want := map[string]string{"driver-writes-secrets": "false", "eks-addon-version": "v1.0.0-eksbuild.1"}
	if got := cfg.upstream.ignored.Given(); !maps.Equal(got, want) {
		t.Errorf("ignored flags given: %v, want %v", got, want)
	}
	// Bare, as the existing provider's flag package allows.
	cfg = mustParseFlags(t, []string{"--driver-writes-secrets"})
	if cfg.upstream.ignored.Given()["driver-writes-secrets"] != "true" {
		t.Errorf("bare --driver-writes-secrets: %v", cfg.upstream.ignored.Given())
	}
}

func TestRunRejectsNonPositiveRateLimits(t *testing.T) {
	cfg := mustParseFlags(t, []string{"--qps=0", "--kubeconfig=/dev/null"})
	if err := run(t.Context(), cfg); err == nil {
		t.Error("--qps=0: no error")
	}
}

// TestRegionDefaults: --region defaults to AWS_REGION, which the existing
// provider prefers to the node's label, and --node-name to NODE_NAME (the
// downward API in the DaemonSet).
func TestRegionDefaults(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-central-1")
	t.Setenv("NODE_NAME", "ip-10-0-0-1.ec2.internal")
	cfg := mustParseFlags(t, nil)
	if cfg.region != "eu-central-1" || cfg.nodeName != "ip-10-0-0-1.ec2.internal" {
		t.Errorf("region %q node %q", cfg.region, cfg.nodeName)
	}
	t.Setenv("AWS_REGION", "")
	cfg = mustParseFlags(t, []string{"--node-name=n2"})
	if cfg.region != "" || cfg.nodeName != "n2" {
		t.Errorf("region %q node %q", cfg.region, cfg.nodeName)
	}
}

// TestRateLimitDefaults: without --qps and --burst the Kubernetes client
// gets kubeclient's defaults, sized for a cold start of many identities.
func TestRateLimitDefaults(t *testing.T) {
	cfg := mustParseFlags(t, nil)
	if cfg.upstream.qps != kubeclient.DefaultQPS || cfg.upstream.burst != kubeclient.DefaultBurst {
		t.Errorf("qps %v burst %d, want %v and %d", cfg.upstream.qps, cfg.upstream.burst, kubeclient.DefaultQPS, kubeclient.DefaultBurst)
	}
}
