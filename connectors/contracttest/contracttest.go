// Package contracttest holds what the kv and ec connector contracts
// (kvtest, ectest) both check: that a result is fresh memory, and that a
// connector is safe for concurrent use.
package contracttest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Clobber overwrites b, as a caller that reuses a result's memory would.
func Clobber(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}

// Concurrently runs call calls times on each of workers goroutines at
// once; a worker stops at its first error, and every worker's error fails
// t.
func Concurrently(t *testing.T, workers, calls int, call func() error) {
	t.Helper()
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range calls {
				if err := call(); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for w, err := range errs {
		assert.NoError(t, err, "worker %d", w)
	}
}
