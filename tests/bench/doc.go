// Package bench holds keymount's node plugin benchmarks, run through the CSI
// socket against the local provider with real tmpfs mounts, and
// BenchmarkController: the keymount-controller binary with 10,000
// SecretSyncs (KEYMOUNT_BENCH_SECRETSYNCS scales it down) against a real
// API server, the local provider and the AWS provider on moto_server, and
// BenchmarkFanout: the controller with --enable-fanout copying one TLS
// Secret into 1,000 namespaces among 10,000 and then 50,000 unrelated
// Secrets (KEYMOUNT_BENCH_FANOUT_NAMESPACES and
// KEYMOUNT_BENCH_FANOUT_UNRELATED scale it down), and BenchmarkVaultHour:
// an hour of refreshes of leased PKI certificates through the Vault provider
// against a real Vault (VAULT_BIN, `make vault-env`), compressed to 2
// minutes:
//
//	go test -run '^$' -bench . -benchmem ./tests/bench
//
// They must run as root.
package bench
