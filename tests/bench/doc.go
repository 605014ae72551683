// Package bench holds keymount's node plugin benchmarks, run through the CSI
// socket against the local provider with real tmpfs mounts, and
// BenchmarkController: the keymount-controller binary with 10,000
// SecretSyncs (KEYMOUNT_BENCH_SECRETSYNCS scales it down) against a real
// API server, the local provider and the AWS provider on moto_server:
//
//	go test -run '^$' -bench . -benchmem ./tests/bench
//
// They must run as root.
package bench
