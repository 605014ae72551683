// Package providercmd is the start-up the provider binaries
// (keymount-provider-local, -aws, -vault) share: the --version answer,
// log redaction, running until SIGINT or SIGTERM, the Prometheus endpoint
// of --metrics-addr, serving a provider on its socket with the log lines
// around it, and --probe, the containers' liveness and readiness probe
// (Probe: gRPC's health check of the provider's own socket).
//
// It never exits the process and defines no flags: each
// cmd/<binary>/main.go binds its flags into its config, calls it, and
// exits.
package providercmd
