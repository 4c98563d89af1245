package sim

import (
	"net/http"
	"strconv"
	"strings"
)

// FaultHeader selects injected faults per request; see the package doc.
const FaultHeader = "X-Sim-Fault"

// Fault targets of [FaultHeader].
const (
	FaultTargetEncode      = "encode"
	FaultTargetPrefill     = "prefill"
	FaultTargetDecode      = "decode"
	FaultTargetConditional = "conditional"
	FaultTargetRender      = "render"
)

type faultKind int

const (
	faultNone faultKind = iota
	faultStatus
	faultHang
	faultReset
)

// fault is one injected failure.
type fault struct {
	kind   faultKind
	status int
}

// faultSet is the parsed [FaultHeader]: a fault per target.
type faultSet map[string]fault

// parseFaults reads [FaultHeader]; every value may hold a comma list of
// target=fault entries.
func parseFaults(h http.Header) (faultSet, *apiError) {
	values := h.Values(FaultHeader)
	if len(values) == 0 {
		return nil, nil
	}
	set := faultSet{}
	for _, v := range values {
		for entry := range strings.SplitSeq(v, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			target, spec, ok := strings.Cut(entry, "=")
			target = strings.ToLower(strings.TrimSpace(target))
			if !ok || !validFaultTarget(target) {
				return nil, badRequest("sim: invalid %s entry %q: want <encode|prefill|decode|conditional|render>=<fault>", FaultHeader, entry)
			}
			f, err := parseFault(strings.TrimSpace(spec))
			if err != nil {
				return nil, err
			}
			set[target] = f
		}
	}
	return set, nil
}

func validFaultTarget(t string) bool {
	switch t {
	case FaultTargetEncode, FaultTargetPrefill, FaultTargetDecode, FaultTargetConditional, FaultTargetRender:
		return true
	}
	return false
}

func parseFault(spec string) (fault, *apiError) {
	switch strings.ToLower(spec) {
	case "hang":
		return fault{kind: faultHang}, nil
	case "reset-mid-stream":
		return fault{kind: faultReset}, nil
	}
	if code, ok := strings.CutPrefix(spec, "status:"); ok {
		n, err := strconv.Atoi(code)
		if err == nil && n >= 400 && n <= 599 {
			return fault{kind: faultStatus, status: n}, nil
		}
	}
	return fault{}, badRequest("sim: invalid %s fault %q: want status:<400-599>, hang or reset-mid-stream", FaultHeader, spec)
}

// target returns the fault for a leg.
func (fs faultSet) target(t string) fault {
	return fs[t]
}

// faultTarget names the target a worker leg answers to.
func faultTarget(rl role, conditional bool) string {
	if conditional {
		return FaultTargetConditional
	}
	return rl.String()
}

// inject answers the leg according to f before any real work, and reports
// whether it did. A reset fault is left to the response writer.
func (f fault) inject(w http.ResponseWriter, r *http.Request) bool {
	switch f.kind {
	case faultStatus:
		writeError(w, &apiError{
			status:  f.status,
			message: "sim: injected fault status:" + strconv.Itoa(f.status),
		})
		return true
	case faultHang:
		<-r.Context().Done()
		return true
	}
	return false
}

// abortConnection ends the response abruptly: net/http closes the connection
// without logging, so the client sees a truncated body.
func abortConnection() {
	panic(http.ErrAbortHandler)
}
