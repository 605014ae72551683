// Package grpcrecover turns a panic in a gRPC handler into a codes.Internal
// error for that call and one log line, instead of a dead process.
//
// Put its interceptor first in the server's chain so that it also covers
// the other interceptors. The log line carries the method, the panic value
// and a trimmed stack, never the request: requests may hold secrets. A panic
// in a goroutine the handler started is not covered: Go can only recover a
// panic on the goroutine that raised it.
package grpcrecover
