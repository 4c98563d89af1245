package deploy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The chart's responses values reach the coordinator's config: the Redis
// store every replica shares, and the tenant header; by default the
// memory store, with no variable set.
func TestHelmResponsesStore(t *testing.T) {
	t.Parallel()
	m := helmTemplate(t, "--set", "responses.backend=redis,responses.redisUrl=redis://coordinator-redis:6379/0,responses.tenantHeader=OpenAI-Project")
	cfg, _ := effectiveConfig(t, m)
	assert.Equal(t, "redis", cfg.Responses.Store.Backend)
	assert.Equal(t, "redis://coordinator-redis:6379/0", cfg.Responses.Store.RedisURL)
	assert.Equal(t, "OpenAI-Project", cfg.Responses.TenantHeader)

	cfg, _ = effectiveConfig(t, helmTemplate(t))
	assert.Equal(t, "memory", cfg.Responses.Store.Backend)
	assert.Empty(t, cfg.Responses.Store.RedisURL)
}
