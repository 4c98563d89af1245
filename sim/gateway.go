package sim

import (
	"net/http"
	"strings"
)

// ProfileHeader is the header the gateway dispatches on.
const ProfileHeader = "EPP-Profile"

// Gateway returns the simulated Inference Gateway: it records the leg,
// applies the strict header rules, and hands the request to the encode,
// prefill or decode pool named by EPP-Profile (case-insensitive; missing
// means decode, the EPP default profile). A decode leg with Prefer:
// if-available is a conditional decode: 412 unless the prompt was served
// before. Unknown profiles are 400 in strict mode and decode otherwise.
func (s *Sim) Gateway() http.Handler {
	return http.HandlerFunc(s.serveGateway)
}

func (s *Sim) serveGateway(w http.ResponseWriter, r *http.Request) {
	body, readErr := readBody(w, r, s.opts.MaxBodyBytes)
	profile := strings.ToLower(strings.TrimSpace(r.Header.Get(ProfileHeader)))
	if profile == "" {
		profile = roleDecode.String()
	}
	w = trackStatus(w, s.legs.record(ServiceGateway, profile, r, body))
	if readErr != nil {
		writeError(w, readErr)
		return
	}
	rl, known := roleOf(profile)
	w.Header().Set(PoolHeader, rl.String())
	if s.opts.Strict {
		if err := checkHeaders(r, len(body) > 0); err != nil {
			writeError(w, err)
			return
		}
		if !known {
			writeError(w, strictError(ruleUnknownProfile+`"`+profile+`"`))
			return
		}
	}
	faults, apiErr := parseFaults(r.Header)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	conditional := rl == roleDecode && preferIfAvailable(r.Header)
	s.watchLeg(r, faultTarget(rl, conditional))
	s.serveLeg(w, r, legCall{
		role:        rl,
		conditional: conditional,
		strict:      s.opts.Strict,
		body:        body,
		fault:       faults.target(faultTarget(rl, conditional)),
		requestID:   r.Header.Get("X-Request-Id"),
	})
}

// preferIfAvailable reports whether a Prefer header holds the token
// if-available (case-insensitive, comma-separated, parameters ignored).
func preferIfAvailable(h http.Header) bool {
	for _, v := range h.Values("Prefer") {
		for pref := range strings.SplitSeq(v, ",") {
			token, _, _ := strings.Cut(pref, ";")
			token, _, _ = strings.Cut(token, "=")
			if strings.EqualFold(strings.TrimSpace(token), "if-available") {
				return true
			}
		}
	}
	return false
}
