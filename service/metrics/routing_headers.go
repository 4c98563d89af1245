package metrics

import "github.com/prometheus/client_golang/prometheus"

// newRoutingDropped registers coordinator_client_routing_headers_dropped_total
// on r, its series of the known APIs and endpoints at 0.
func newRoutingDropped(r *prometheus.Registry) *prometheus.CounterVec {
	return newEndpointCounter(r, "coordinator_client_routing_headers_dropped_total",
		"Requests whose own routing headers (x-gateway-*, x-llm-d-*, x-*-host-port, x-data-parallel-rank, "+
			"EPP-Profile, Prefer) the coordinator removed before any leg (compat D24), by API and endpoint.")
}

// ClientRoutingHeadersDropped counts a request of api and endpoint whose
// client-set routing headers were removed.
func (m *Metrics) ClientRoutingHeadersDropped(api, endpoint string) {
	m.routingDropped.WithLabelValues(api, endpoint).Inc()
}
