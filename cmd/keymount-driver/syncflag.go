package main

import (
	"fmt"
	"strconv"
	"strings"
)

// syncMode is --sync-secrets: a boolean flag (a bare --sync-secrets is
// true) that also takes "auto".
type syncMode string

const (
	syncOn   syncMode = "true"
	syncOff  syncMode = "false"
	syncAuto syncMode = "auto"
)

func (m *syncMode) String() string { return string(*m) }

// IsBoolFlag lets --sync-secrets stand alone, as before it took "auto".
func (m *syncMode) IsBoolFlag() bool { return true }

func (m *syncMode) Set(s string) error {
	if strings.EqualFold(s, string(syncAuto)) {
		*m = syncAuto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q: want true, false or auto", s)
	}
	*m = syncOff
	if b {
		*m = syncOn
	}
	return nil
}
