package admission

import (
	"testing"

	"github.com/stretchr/testify/assert"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// A token count is admitted as a request (it calls the render service);
// the queued requests' lookups are not.
func TestAdmitsCountTokens(t *testing.T) {
	t.Parallel()
	for method, want := range map[string][2]bool{
		coordinatorv1.CoordinatorService_CountTokens_FullMethodName:    {true, false},
		coordinatorv1.CoordinatorService_Generate_FullMethodName:       {true, false},
		coordinatorv1.CoordinatorService_GenerateStream_FullMethodName: {true, true},
		coordinatorv1.CoordinatorService_GetRequest_FullMethodName:     {false, false},
	} {
		ok, stream := admits(method)
		assert.Equal(t, want, [2]bool{ok, stream}, method)
	}
}
