package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
)

// Encode worker identity in ec_transfer_params descriptors.
const (
	EncodePeerHost = "127.0.0.1"
	EncodePeerPort = 5501
)

// ecDescriptor is the NIXL-style descriptor an encode worker answers for one
// image.
type ecDescriptor struct {
	PeerHost             string `json:"peer_host"`
	PeerPort             int    `json:"peer_port"`
	SizeBytes            int    `json:"size_bytes"`
	NIXLAgentMetadataB64 string `json:"nixl_agent_metadata_b64"`
}

type encodeResponse struct {
	ID               string                  `json:"id,omitempty"`
	RequestID        string                  `json:"request_id,omitempty"`
	Object           string                  `json:"object,omitempty"`
	Created          int64                   `json:"created,omitempty"`
	Model            string                  `json:"model,omitempty"`
	Choices          []struct{}              `json:"choices"`
	ECTransferParams map[string]ecDescriptor `json:"ec_transfer_params"`
}

// ECDescriptorSize is the size_bytes an encode worker reports for an image
// whose placeholder run has this many tokens.
func ECDescriptorSize(placeholderLength int) int {
	return placeholderLength * 4096
}

// answerEncode answers an encode leg: one ec_transfer_params descriptor per
// image mm_hash of the request, no generated tokens.
func (s *Sim) answerEncode(ctx context.Context, w http.ResponseWriter, call legCall, req *workerRequest, model string) {
	feat := req.features()
	ec := make(map[string]ecDescriptor, len(feat.MMHashes.Image))
	for i, h := range feat.MMHashes.Image {
		length := ImagePlaceholderLength
		if i < len(feat.MMPlaceholders.Image) && feat.MMPlaceholders.Image[i].Length > 0 {
			length = feat.MMPlaceholders.Image[i].Length
		}
		ec[h] = ecDescriptor{
			PeerHost:             EncodePeerHost,
			PeerPort:             EncodePeerPort,
			SizeBytes:            ECDescriptorSize(length),
			NIXLAgentMetadataB64: base64.StdEncoding.EncodeToString([]byte("sim-encode-0/" + h)),
		}
	}
	resp := encodeResponse{Choices: []struct{}{}, ECTransferParams: ec}
	id := s.responseID(req, call.requestID)
	if req.format == formatGenerate {
		resp.RequestID = id
	} else {
		resp.ID, resp.Model, resp.Created = id, model, s.opts.Now().Unix()
		resp.Object = "chat.completion"
		if req.format == formatCompletions {
			resp.Object = "text_completion"
		}
	}
	body, err := json.Marshal(resp)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, message: "sim: encode response: " + err.Error()})
		return
	}
	writeRaw(ctx, w, "application/json", body, call.fault)
}
