package awstest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/keymount/keymount/tests/motoserver"
)

// StartMoto runs moto_server on 127.0.0.1 and returns its endpoint; see
// motoserver.Start. It never skips: without moto_server the test fails.
func StartMoto(t testing.TB) (endpoint string) {
	t.Helper()
	return motoserver.Start(t)
}

// MotoCredentials returns a provider of the fake static credentials moto
// accepts.
func MotoCredentials() aws.CredentialsProvider { return motoserver.Credentials() }
