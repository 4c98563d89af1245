package gateway

import (
	"context"
	"time"
)

// SetRetryClock replaces c's retry randomness and sleep: jitter(n) picks a
// wait in [0, n), sleep waits (or not) and returns ctx's error.
func SetRetryClock(c *Client, jitter func(n int64) int64, sleep func(ctx context.Context, d time.Duration) error) {
	c.jitter, c.sleep = jitter, sleep
}

// SetDefaultTransport makes name the pool of the plain-http clients whose
// Options.Transport is empty, for the tests that follow.
func SetDefaultTransport(name string) { defaultTransport = name }
