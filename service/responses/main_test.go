package responses_test

import (
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
