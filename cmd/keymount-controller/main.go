// Command keymount-controller serves secret-sync.x-k8s.io/v1alpha1
// SecretSyncs: it fills the Secret each one describes from the providers
// keymount's node driver uses, without pods or volumes. It accepts the
// flags of kubernetes-sigs/secrets-store-sync-controller with their
// meaning, plus keymount's own.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/keymount/keymount/internal/cliflag"
	"github.com/keymount/keymount/internal/logredact"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	// Its own flag set: controller-runtime defines --kubeconfig on
	// flag.CommandLine.
	fs := flag.NewFlagSet("keymount-controller", flag.ContinueOnError)
	cfg, err := parseFlags(fs, os.Args[1:], os.Getenv)
	if err != nil {
		os.Exit(cliflag.ExitCode(err)) // parseFlags printed the usage, or one line naming the mistake.
	}
	if cfg.printVersion {
		fmt.Println("keymount-controller", version)
		return
	}
	runtime.MemProfileRate = memProfileRate(cfg.pprofAddr, os.Getenv("GODEBUG"), runtime.MemProfileRate)
	logredact.Install() // no HTTP body (Secrets, tokens) in any log, at any -v
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg)
	stop()
	if err != nil {
		klog.ErrorS(err, "keymount-controller stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// memProfileRate is the heap profile's sampling rate: none while the pprof
// endpoints are off (--pprof-bind-address empty or 0, the default), since
// no heap profile can be read then and the sampled allocation sites' table
// costs memory that is never returned (about 2 MB at 10,000 SecretSyncs:
// tests/bench BenchmarkController); the runtime's rate (current) when they
// are on or GODEBUG sets memprofilerate.
func memProfileRate(pprofAddr, godebug string, current int) int {
	if strings.Contains(godebug, "memprofilerate=") || (pprofAddr != "" && pprofAddr != "0") {
		return current
	}
	return 0
}
