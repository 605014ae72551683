// Package panics recovers a panic where it happens, so that one bug in one
// handler costs that piece of work, not the process.
//
// Every goroutine keymount starts outside a gRPC call (refresh triggers,
// the reporter's writes, informer event handlers, periodic sweeps) defers
// [Recover] at its top; the gRPC interceptors of internal/grpcrecover
// report through [Report] too. A recovered panic is logged once, with
// where it happened, the panic value and a trimmed stack — never the
// arguments of the work, which may hold secrets — and counted in
// keymount_panics_recovered_total. Go recovers a panic only on the
// goroutine that raised it: a goroutine started from a covered one needs
// its own deferred Recover.
package panics
