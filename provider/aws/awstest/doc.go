// Package awstest gives tests outside provider/aws the AWS stand-ins of
// provider/aws/internal: a real moto_server on 127.0.0.1, stopped when the
// test ends, and the fake static credentials it accepts. It holds no logic
// of its own, so that there is one way to start moto.
package awstest
