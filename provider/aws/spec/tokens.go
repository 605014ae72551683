package spec

import (
	"encoding/json"
	"sort"
)

// tokenEntry is one value of the driver's serviceAccount.tokens JSON.
type tokenEntry struct {
	Token               string `json:"token"`
	ExpirationTimestamp string `json:"expirationTimestamp"`
}

// parseTokens reads the driver's JSON map audience -> {token,
// expirationTimestamp}. Errors never quote the input: it holds tokens.
func parseTokens(p *problems, v string) map[string]string {
	if v == "" {
		return nil
	}
	var entries map[string]*tokenEntry
	if err := json.Unmarshal([]byte(v), &entries); err != nil || entries == nil {
		// The decoder's message may quote part of the input: drop it.
		p.addf("%s: is not a JSON object of audience to {token, expirationTimestamp} (contents not shown); check the CSIDriver's tokenRequests", KeyTokens)
		return nil
	}
	tokens := make(map[string]string, len(entries))
	auds := make([]string, 0, len(entries))
	for aud := range entries {
		auds = append(auds, aud)
	}
	sort.Strings(auds)
	for _, aud := range auds {
		e := entries[aud]
		if e == nil || e.Token == "" {
			p.addf("%s: the token for audience %s is empty; check the CSIDriver's tokenRequests", KeyTokens, quote(aud))
			continue
		}
		tokens[aud] = e.Token
	}
	return tokens
}
