// Package motoserver runs the real moto_server (a local AWS stand-in) for
// tests: bound to 127.0.0.1 only, on a free port, stopped when the test ends.
// Clients talk to it with fake static credentials and an explicit
// BaseEndpoint, so nothing can reach real AWS.
package motoserver
