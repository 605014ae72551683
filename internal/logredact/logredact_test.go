package logredact

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestBodiesNeverReachTheLog logs the way client-go does at -v=10 and checks
// that the output names the message but never holds the body.
func TestBodiesNeverReachTheLog(t *testing.T) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Parse([]string{"-v=10", "-logtostderr=false", "-alsologtostderr=false"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	klog.SetOutput(&out)
	Install()
	t.Cleanup(func() { klog.SetLogFilter(nil) })

	const secret = `{"kind":"Secret","data":{"password":"c3VwZXItc2VjcmV0LXZhbHVl"}}`
	logger := klog.Background()
	logger.V(8).Info("Request Body", "body", secret)
	logger.V(8).Info("Response Body", "body", []byte(secret))
	klog.V(8).InfoS("Response Body", "body", secret)
	klog.V(8).Infof("Request Body: %s", secret) //nolint:forbidigo // client-go's older printf-style body log, which the filter must catch too.
	klog.V(2).InfoS("volume published", "volumeID", "csi-1")
	klog.Flush()

	got := out.String()
	if strings.Contains(got, "c3VwZXItc2VjcmV0LXZhbHVl") {
		t.Fatalf("a body reached the log:\n%s", got)
	}
	for _, want := range []string{`"Request Body"`, `"Response Body"`, fmt.Sprintf("<redacted: %d bytes>", len(secret)), `volumeID="csi-1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
}
