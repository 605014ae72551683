package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/keymount/keymount/provider/server"
)

// regionName is what checkRegionName lets through, written independently.
var regionName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// FuzzParseParameters fuzzes every top-level parameter Parse reads, the
// objects list and the request's default mode, then SetDefaultRegion with a
// fuzzed node region. A bad value always fails; what is accepted is what
// the parameters say; an error never repeats a long value whole.
func FuzzParseParameters(f *testing.F) {
	objects := []string{
		oneObject,
		`[{objectName: "` + smARN + `", objectAlias: db}]`,
		`[{objectName: "arn:aws:ssm:eu-west-1:1:parameter/a/b", failoverObject: {objectName: "arn:aws:ssm:eu-west-2:1:parameter/a/b"}}]`,
		`[{objectName: a/b/c, objectType: ssmparameter, filePermission: "0400"}]`,
		`[{}]`,
		``,
	}
	for i, o := range objects {
		f.Add("us-east-1", "us-west-2", "", "true", "ipv6", "", uint32(0o644), o)
		f.Add("", "", "False", "false", "ipv4", "eu-west-1", uint32(0o600), o)
		f.Add("us-east-1", "us-east-1", "-", "TRUE", "IPv4", "us-east-1", uint32(0o440), o)
		switch i {
		case 0:
			f.Add("us-east-1.evil.com/", "-x", "__", "yes", "ipv5", "x-", uint32(os.ModeDir|0o755), o)
			f.Add(strings.Repeat("a", 33), "US-EAST-1", `\`, "1", "auto", "us_east_1", uint32(0xffffffff), o)
			f.Add(strings.Repeat("us-east-1/../", 20), "", "\x00", "", "", "\xff", uint32(0), o)
			f.Add("", "", "/", "0", "", "", uint32(0o777), o)
			f.Add("a", "b", ".", "t", "", "", uint32(0o1777), o)
		case 1:
			f.Add("eu-west-1", "", "", "", "", "", uint32(0o644), o)
			f.Add("", "", "", "", "", "us-east-1", uint32(0o644), o)
			f.Add("", "us-east-1", "", "", "", "us-east-1", uint32(0o644), o)
		}
	}
	f.Fuzz(func(t *testing.T, region, failover, translation, use, addr, nodeRegion string, mode uint32, objects string) {
		attrs := map[string]string{
			KeyObjects: objects, KeyRegion: region, KeyFailoverRegion: failover, KeyPathTranslation: translation,
			KeyUsePodIdentity: use, KeyPreferredAddressType: addr,
		}
		s, err := Parse(attrs, os.FileMode(mode))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			for _, v := range []string{region, failover, translation, use, addr} {
				if len(v) > maxQuoted && !strings.Contains(objects, v) && strings.Contains(err.Error(), v) {
					t.Fatalf("error repeats a %d-byte value whole: %v", len(v), err)
				}
			}
			return
		}
		checkTopLevel(t, s, attrs, os.FileMode(mode))
		regionWasSet := s.Region != ""
		err = s.SetDefaultRegion(nodeRegion)
		switch {
		case regionWasSet && (err != nil || s.Region != region):
			t.Fatalf("SetDefaultRegion(%q) with region %q set: %v, Region %q", nodeRegion, region, err, s.Region)
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Fatalf("SetDefaultRegion error does not wrap ErrInvalid: %v", err)
		case err == nil:
			checkRegionsAgree(t, s)
		}
	})
}

// checkTopLevel checks that a Spec Parse accepted says what attrs say.
func checkTopLevel(t *testing.T, s *Spec, attrs map[string]string, mode os.FileMode) {
	t.Helper()
	region, failover, translation := attrs[KeyRegion], attrs[KeyFailoverRegion], attrs[KeyPathTranslation]
	if s.Region != region || s.FailoverRegion != failover {
		t.Fatalf("regions %q, %q; want %q, %q", s.Region, s.FailoverRegion, region, failover)
	}
	for _, r := range []string{region, failover} {
		if r != "" && !regionName.MatchString(r) {
			t.Fatalf("accepted region %q", r)
		}
	}
	checkTranslation(t, translation, s.PathTranslation)
	checkPodIdentity(t, s, attrs[KeyUsePodIdentity], attrs[KeyPreferredAddressType])
	if mode&^os.ModePerm != 0 {
		t.Fatalf("accepted default mode %v", mode)
	}
	if len(s.Objects) == 0 || s.Tokens != nil {
		t.Fatalf("accepted %d objects, tokens %d", len(s.Objects), len(s.Tokens))
	}
	for _, o := range s.Objects {
		if o.Mode&^os.ModePerm != 0 {
			t.Fatalf("object %q has mode %v", o.Name, o.Mode)
		}
		if err := server.ValidatePath(o.FileName); err != nil {
			t.Fatalf("object %q: %v", o.Name, err)
		}
	}
	if s.Region != "" {
		checkRegionsAgree(t, s)
	}
}

// checkTranslation checks the accepted path translation got of translation.
func checkTranslation(t *testing.T, translation, got string) {
	t.Helper()
	switch want := translation; {
	case translation == "":
		want = defaultPathTranslation
		fallthrough
	case !strings.EqualFold(translation, "false"):
		if got != want || len(want) != 1 || want[0] < 0x20 || want[0] >= 0x7f || want[0] == '\\' {
			t.Fatalf("pathTranslation %q accepted as %q", translation, got)
		}
	default:
		if got != "" {
			t.Fatalf("pathTranslation %q accepted as %q", translation, got)
		}
	}
}

// checkPodIdentity checks the accepted usePodIdentity and
// preferredAddressType.
func checkPodIdentity(t *testing.T, s *Spec, useText, addr string) {
	t.Helper()
	use, _ := strconv.ParseBool(useText)
	if s.UsePodIdentity != use {
		t.Fatalf("usePodIdentity %q accepted as %t", useText, s.UsePodIdentity)
	}
	wantAddr := AddressType(strings.ToLower(addr))
	if !use || wantAddr == "" {
		wantAddr = AddressAuto
	}
	if s.AddressType != wantAddr {
		t.Fatalf("preferredAddressType %q (usePodIdentity %t) accepted as %q", addr, use, s.AddressType)
	}
}

// checkRegionsAgree checks a Spec with its region known: the failover region
// differs, and every valid ARN is in the region it is fetched from.
func checkRegionsAgree(t *testing.T, s *Spec) {
	t.Helper()
	if !regionName.MatchString(s.Region) || s.FailoverRegion == s.Region {
		t.Fatalf("accepted region %q with failover region %q", s.Region, s.FailoverRegion)
	}
	for _, o := range s.Objects {
		if a, ok := parseARN(o.Name); ok && a.valid() && a.region != s.Region {
			t.Fatalf("accepted ARN %q in region %q", o.Name, s.Region)
		}
		if o.Failover == nil {
			continue
		}
		if a, ok := parseARN(o.Failover.Name); ok && a.valid() && a.region != s.FailoverRegion {
			t.Fatalf("accepted failover ARN %q in region %q", o.Failover.Name, s.FailoverRegion)
		}
	}
}

// FuzzParseTokens fuzzes the serviceAccount.tokens JSON of the volume
// context ({"audience": {"token": ..., "expirationTimestamp": ...}}, "TOKEN"
// standing for a real token). Every problem Parse reports is one of two
// fixed messages, the second naming an audience only: no error shows a
// token, whatever the input. An accepted map has a non-empty token for
// every audience, and String does not depend on the tokens.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		`{"sts.amazonaws.com": {"token": "TOKEN", "expirationTimestamp": "2030-01-01T00:00:00Z"}}`,
		`{"sts.amazonaws.com": {"token": "TOKEN"}, "pods.eks.amazonaws.com": {"token": "TOKEN", "expirationTimestamp": "2030-01-01T00:00:00+02:00"}}`,
		`{"sts": {"token": "TOKEN", "expirationTimestamp": "not a time"}}`,
		`{"sts": {"token": "TOKEN", "expirationTimestamp": 99999999999999999999}}`,
		`{"sts": {"TOKEN": "TOKEN", "Token": "TOKEN"}}`,
		`{"sts": {"token": ""}, "b": {"token": "TOKEN"}}`,
		`{"sts": null, "TOKEN": {"token": ""}}`,
		`{"sts": {"token": 1, "x": "TOKEN"}}`,
		`{"sts": "TOKEN"}`,
		`{"sts": {"token": "TOKEN"`,
		`["TOKEN"]`,
		`"TOKEN"`,
		`null`,
		`{}`,
		`{"sts": {"token": "TOKEN\u0000\n\"TOKEN"}, "\ud800": {"token": "TOKEN"}}`,
		`{"sts": {"token": "TOKEN"}, "sts": {"token": ""}}`,
		"{\"\xff\": {\"token\": \"TOKEN\xfe\"}}",
		`TOKEN`,
	} {
		f.Add(s)
	}
	fixed := KeyTokens + ": is not a JSON object of audience to {token, expirationTimestamp} (contents not shown); check the CSIDriver's tokenRequests"
	f.Fuzz(func(t *testing.T, raw string) {
		raw = strings.ReplaceAll(raw, "TOKEN", tokenMarker)
		var entries map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &entries) != nil {
			entries = nil
		}
		allowed := map[string]bool{fixed: true}
		markerInAudience := false
		for aud := range entries {
			allowed[fmt.Sprintf("%s: the token for audience %s is empty; check the CSIDriver's tokenRequests", KeyTokens, quote(aud))] = true
			markerInAudience = markerInAudience || strings.Contains(aud, tokenMarker)
		}
		s, err := Parse(map[string]string{KeyObjects: oneObject, KeyTokens: raw}, 0o644)
		if err != nil {
			msg, ok := strings.CutPrefix(err.Error(), ErrInvalid.Error()+": ")
			if !ok || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not start from ErrInvalid: %v", err)
			}
			for line := range strings.SplitSeq(msg, "\n") {
				if !allowed[line] {
					t.Fatalf("unexpected problem %q", line)
				}
			}
			if !markerInAudience && strings.Contains(msg, tokenMarker) {
				t.Fatalf("error shows a token: %v", err)
			}
			return
		}
		if raw != "" && (entries == nil || len(s.Tokens) != len(entries)) {
			t.Fatalf("accepted %d tokens from %d entries", len(s.Tokens), len(entries))
		}
		blank := *s
		blank.Tokens = map[string]string{}
		for aud, tok := range s.Tokens {
			if _, ok := entries[aud]; !ok || tok == "" {
				t.Fatalf("accepted token %d bytes for audience %q", len(tok), aud)
			}
			blank.Tokens[aud] = "x"
		}
		if s.Tokens != nil && s.String() != blank.String() {
			t.Fatalf("String depends on the token values: %s", s)
		}
	})
}
