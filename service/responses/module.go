package responses

import (
	"time"

	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// Module provides the response store of responses.store: a *Store, nil
// when the backend is off.
var Module = fx.Module("responses", fx.Provide(New))

// redisTimeout bounds each Redis command: a store that does not answer
// within it counts as down.
const redisTimeout = 2 * time.Second

// New builds the response store of cfg.Responses, nil when its backend is
// off. A Redis backend connects lazily: a server not answering at start
// is no startup failure (the requests that need it get 503 until it
// answers); its client is closed at stop.
func New(lc fx.Lifecycle, cfg config.Config, m *metrics.Metrics) (*Store, error) {
	r := cfg.Responses
	if !r.Enabled() {
		return nil, nil
	}
	o := Options{TTL: r.Store.TTL, StoreByDefault: r.StoreByDefault, MaxHistoryBytes: r.MaxHistoryBytes, TenantHeader: r.TenantHeader}
	sm := m.NewResponseStore()
	if r.Store.Backend == config.StoreRedis {
		rd, err := responsestore.NewRedis(responsestore.RedisOptions{
			URL: r.Store.RedisURL, Prefix: "coordinator:", MaxBytes: r.Store.Bytes(), Timeout: redisTimeout,
		})
		if err != nil {
			return nil, err
		}
		lc.Append(fx.StopHook(rd.Close))
		return NewStore(rd, config.StoreRedis, o, sm), nil
	}
	mem := responsestore.NewMemory(responsestore.MemoryOptions{
		MaxBytes: r.Store.Bytes(), MaxEntries: r.Store.MaxEntries, Evicted: sm.Evicted,
	})
	return NewStore(mem, config.StoreMemory, o, sm), nil
}
