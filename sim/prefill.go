package sim

import (
	"bytes"
	"encoding/json"
)

// Prefill worker identity in kv_transfer_params answers.
const (
	PrefillEngineID = "sim-prefill-0"
	PrefillHost     = "127.0.0.1"
	PrefillPort     = 5600
)

// prefillRecord is what decode checks about the prefill of a request.
type prefillRecord struct {
	engineID string
	// forwarded is true when the prefill request's connector forwards the
	// prefill answer to decode (kv-nixl, kv-sglang), so decode must carry
	// remote_engine_id.
	forwarded bool
}

// kvAnswer is the NIXL-style kv_transfer_params a prefill worker answers;
// the bootstrap fields echo a kv-sglang request.
type kvAnswer struct {
	DoRemotePrefill bool            `json:"do_remote_prefill"`
	DoRemoteDecode  bool            `json:"do_remote_decode"`
	RemoteBlockIDs  [][]int         `json:"remote_block_ids"`
	RemoteEngineID  string          `json:"remote_engine_id"`
	RemoteRequestID string          `json:"remote_request_id"`
	RemoteHost      string          `json:"remote_host"`
	RemotePort      int             `json:"remote_port"`
	TPSize          int             `json:"tp_size"`
	BootstrapHost   string          `json:"bootstrap_host,omitempty"`
	BootstrapPort   json.RawMessage `json:"bootstrap_port,omitempty"`
	BootstrapRoom   json.RawMessage `json:"bootstrap_room,omitempty"`
}

// prefillAnswer remembers that a prefill ran for the leg's request id and
// returns the kv_transfer_params to answer with.
func (s *Sim) prefillAnswer(call legCall, req *workerRequest) json.RawMessage {
	remoteID := call.requestID
	if remoteID == "" {
		remoteID = req.RequestID
	}
	a := kvAnswer{
		DoRemotePrefill: true,
		RemoteBlockIDs:  [][]int{{1, 2, 3}},
		RemoteEngineID:  PrefillEngineID,
		RemoteRequestID: remoteID,
		RemoteHost:      PrefillHost,
		RemotePort:      PrefillPort,
		TPSize:          1,
	}
	forwarded := false
	if kv, ok := kvObject(req.kvParams()); ok {
		for k := range kv {
			if k != "do_remote_decode" && k != "do_remote_prefill" {
				forwarded = true
			}
		}
		if room, ok := kv["bootstrap_room"]; ok && !isNull(room) {
			a.BootstrapHost = PrefillHost
			a.BootstrapPort = bytes.Clone(kv["bootstrap_port"])
			a.BootstrapRoom = bytes.Clone(room)
		}
	}
	if call.requestID != "" {
		s.prefilled.put(call.requestID, prefillRecord{engineID: PrefillEngineID, forwarded: forwarded})
	}
	out, _ := json.Marshal(a) // cannot fail: plain values and valid raw JSON
	return out
}
