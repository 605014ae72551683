//go:build integration

package main

import (
	"os"
	"testing"

	"github.com/keymount/keymount/tests/k8senv"
)

// TestMain stops the tests' shared control plane (startSharedCluster) after them.
func TestMain(m *testing.M) { os.Exit(k8senv.Run(m)) }
