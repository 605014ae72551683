package volume

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzRecord decodes a record.json the way a record is read back, encodes
// it the way it is saved, and decodes that again: a record that decodes
// encodes, and survives the round trip unchanged, byte for byte from the
// first encoding on.
func FuzzRecord(f *testing.F) {
	for _, s := range []string{
		`{"volumeID":"csi-0123","targetPath":"/var/lib/kubelet/pods/0c4e/volumes/kubernetes.io~csi/secrets/mount",` +
			`"podName":"web-0","podNamespace":"default","podUID":"0c4e","serviceAccount":"web",` +
			`"secretProviderClass":"aws-secrets","provider":"aws","readOnly":true,` +
			`"objects":[{"id":"arn:aws:secretsmanager:us-east-1:123456789012:secret:db-AbCdEf","version":"v1"}],` +
			`"generation":3,"lastMount":"2026-11-21T10:52:01.123456789Z","lastChange":"2026-11-21T10:00:00Z",` +
			`"lastError":"provider \"aws\" failed","lastErrorTime":"2026-11-21T10:51:00+02:00"}`,
		`{}`,
		`null`,
		`{"objects":[]}`,
		`{"objects":null,"generation":-9223372036854775808}`,
		`{"generation":9223372036854775808}`,
		`{"generation":1e3}`,
		`{"lastMount":"0000-01-01T00:00:00Z","lastChange":"9999-12-31T23:59:59.999999999-23:59"}`,
		`{"lastMount":"2026-13-01T00:00:00Z"}`,
		`{"lastMount":"2026-01-01T00:00:00+24:00"}`,
		`{"lastErrorTime":"0001-01-01T00:00:00Z"}`,
		`{"targetPath":"../../etc\u0000passwd","podName":"\ud800"}`,
		"{\"volumeID\":\"\xff\xfe\",\"podName\":\"\xed\xa0\x80\"}",
		`{"VOLUMEID":"upper","volumeid":"lower","volumeID":"exact"}`,
		`{"readOnly":"true"}`,
		`{"objects":[{"id":1}]}`,
		`{"volumeID":"a"`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var probe struct {
			VolumeID string `json:"volumeID"`
		}
		_ = json.Unmarshal(data, &probe)
		first, err := decodeRecord(probe.VolumeID, data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(first)
		if err != nil {
			t.Fatalf("a record that loads does not save: %v", err)
		}
		second, err := decodeRecord(probe.VolumeID, enc)
		if err != nil {
			t.Fatalf("decode the encoded record %s: %v", enc, err)
		}
		if diff := cmp.Diff(first, second); diff != "" {
			t.Fatalf("round trip changed the record (-decoded +re-decoded):\n%s", diff)
		}
		again, err := json.Marshal(second)
		if err != nil {
			t.Fatalf("encode the record again: %v", err)
		}
		if !bytes.Equal(enc, again) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, again)
		}
	})
}
