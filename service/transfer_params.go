package service

import (
	"context"
	"log/slog"

	"github.com/coordinator-project/coordinator/service/metrics"
)

// TransferParamsDropped reports a request whose own transfer params were
// removed before any leg (compat D23; requestbody.DropTransferParams): one info
// line naming the request, its API and endpoint and the dotted keys
// removed, then more attributes, and a count in
// coordinator_client_transfer_params_dropped_total. The service reports its
// requests, the REST front its relayed ones.
func TransferParamsDropped(ctx context.Context, m *metrics.Metrics, log *slog.Logger, id, api, endpoint string, dropped []string, more ...any) {
	m.ClientTransferParamsDropped(api, endpoint)
	log.InfoContext(ctx, "client transfer params dropped",
		append([]any{"request_id", id, "api", api, "endpoint", endpoint, "keys", dropped}, more...)...)
}
