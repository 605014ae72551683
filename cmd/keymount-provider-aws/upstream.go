package main

import (
	"flag"

	"github.com/keymount/keymount/internal/ignoredflags"
	"github.com/keymount/keymount/provider/aws/kubeclient"
)

// upstream holds the flags of the existing AWS provider
// (aws/secrets-store-csi-driver-provider-aws) that keymount-provider-aws
// accepts, so that its manifests and Helm values run unchanged.
// --provider-volume is an alias of --provider-dir; --qps, --burst and
// --pod-identity-http-timeout keep their meaning; the rest are accepted
// and logged once as ignored.
type upstream struct {
	qps   float64
	burst int
	// ignored are the existing provider's flags keymount does not need.
	ignored *ignoredflags.Set
}

// ignoredAWSFlags are the existing provider's flags keymount does not
// need, with why.
var ignoredAWSFlags = map[string]ignoredflags.Flag{
	"driver-writes-secrets": {Usage: "existing provider: return the files for the driver to write instead of writing them",
		Why: "keymount-provider-aws always returns the files and the driver writes them atomically", Bool: true},
	"eks-addon-version": {Usage: "existing provider: the EKS add-on version, sent in the user agent",
		Why: "keymount-provider-aws sends its own version in the user agent"},
}

// addUpstreamFlags registers the existing provider's flag names on fs;
// call it after keymount's own, whose defaults the aliases keep.
func addUpstreamFlags(fs *flag.FlagSet, cfg *config) *upstream {
	u := &upstream{}
	fs.StringVar(&cfg.server.SocketDir, "provider-volume", cfg.server.SocketDir, "the existing provider's name of --provider-dir")
	fs.Float64Var(&u.qps, "qps", kubeclient.DefaultQPS, "API server requests a second, sustained (one service account read per new identity, "+
		"one node read); the default lets 100 pods of new service accounts mount at 100 a second and more")
	fs.IntVar(&u.burst, "burst", kubeclient.DefaultBurst, "API server requests allowed at once above --qps (a cold start of that many new identities never waits)")
	fs.DurationVar(&cfg.podIdentityTimeout, "pod-identity-http-timeout", 0, "timeout of one request to the EKS Pod Identity agent (default 10s)")
	u.ignored = ignoredflags.Register(fs, ignoredAWSFlags)
	return u
}
