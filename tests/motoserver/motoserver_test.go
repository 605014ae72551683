package motoserver_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keymount/keymount/tests/motoserver"
)

func TestStartAnswersOnLoopback(t *testing.T) {
	endpoint := motoserver.Start(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" {
		t.Errorf("endpoint %q is not bound to 127.0.0.1", endpoint)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint+"/moto-api/", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("moto_server does not answer: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /moto-api/ = %d, want 200", resp.StatusCode)
	}
}

func TestStartLoggingWritesTheServersOutput(t *testing.T) {
	log := filepath.Join(t.TempDir(), "moto.log")
	endpoint := motoserver.StartLogging(t, log)
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "Running on "+endpoint) {
		t.Errorf("log %s does not hold the line naming %s:\n%s", log, endpoint, data)
	}
}
