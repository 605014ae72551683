//go:build integration

package restart_test

import (
	"os"
	"testing"

	"github.com/keymount/keymount/tests/k8senv"
)

// TestMain stops the shared control plane (startAPI) after the tests.
func TestMain(m *testing.M) { os.Exit(k8senv.Run(m)) }
