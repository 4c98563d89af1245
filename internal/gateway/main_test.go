package gateway_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// TestMain runs the suite on h1's transport, then again on net/http's
// (Options.Transport, gateway.transport): the client behaves the same on
// both.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		fmt.Fprintln(os.Stderr, "upstream: the suite again, on net/http's transport")
		gateway.SetDefaultTransport(gateway.TransportNetHTTP)
		code = m.Run()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
