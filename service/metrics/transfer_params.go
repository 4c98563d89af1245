package metrics

import "github.com/prometheus/client_golang/prometheus"

// newTransferDropped registers coordinator_client_transfer_params_dropped_total
// on r, its series of the known APIs and endpoints at 0.
func newTransferDropped(r *prometheus.Registry) *prometheus.CounterVec {
	return newEndpointCounter(r, "coordinator_client_transfer_params_dropped_total",
		"Requests whose own kv_transfer_params or ec_transfer_params the coordinator removed before any leg "+
			"(server.trust_client_transfer_params off), by API and endpoint.")
}

// newEndpointCounter registers a counter of requests by API and endpoint on
// r, its series of the known APIs and endpoints at 0.
func newEndpointCounter(r *prometheus.Registry, name, help string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"api", "endpoint"})
	r.MustRegister(c)
	for _, api := range apis {
		for _, ep := range endpointsOf(api) {
			c.WithLabelValues(api, ep)
		}
	}
	return c
}

// ClientTransferParamsDropped counts a request of api and endpoint whose
// client-set transfer params were removed.
func (m *Metrics) ClientTransferParamsDropped(api, endpoint string) {
	m.transferDropped.WithLabelValues(api, endpoint).Inc()
}
