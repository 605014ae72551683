// Package bench holds keymount's node plugin benchmarks, run through the CSI
// socket against the local provider with real tmpfs mounts:
//
//	go test -run '^$' -bench . -benchmem ./tests/bench
//
// They must run as root.
package bench
