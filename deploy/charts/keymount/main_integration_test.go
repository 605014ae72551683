//go:build integration

package keymount_test

import (
	"os"
	"testing"

	"github.com/keymount/keymount/tests/k8senv"
)

// TestMain stops the shared control plane (sharedWithCRDs) after the tests.
func TestMain(m *testing.M) { os.Exit(k8senv.Run(m)) }
