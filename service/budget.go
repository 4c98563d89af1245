package service

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// newBudget is the process's memory budget (server.memory_budget), its
// metrics registered; nil when off.
func newBudget(cfg config.Config, m *metrics.Metrics) *membudget.Budget {
	b := membudget.New(cfg.Server.MemoryBudgetBytes(membudget.DefaultLimit), cfg.Server.MemoryBudgetWait)
	m.Budget(b)
	return b
}

// budgetUnary opens a call's account of the memory budget, draws the
// received request's share (membudget.BodyCharge of its size) and puts the
// account in the handler's context, closing it when the call returns. A
// call that already carries an account (the REST front's, in process) keeps
// it: its body is drawn once. A refusal is RESOURCE_EXHAUSTED, with a
// RetryInfo unless the request can never fit (apierror.BudgetStatus).
func budgetUnary(b *membudget.Budget) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if membudget.FromContext(ctx) != nil {
			return handler(ctx, req)
		}
		a := b.Open()
		defer a.Close()
		if err := drawMessage(ctx, a, req); err != nil {
			return nil, err
		}
		return handler(membudget.WithAccount(ctx, a), req)
	}
}

// budgetStream is budgetUnary for streams: each message received draws
// its share; the account closes when the stream's handler returns.
func budgetStream(b *membudget.Budget) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if membudget.FromContext(ss.Context()) != nil {
			return handler(srv, ss)
		}
		a := b.Open()
		defer a.Close()
		return handler(srv, &budgetedStream{ServerStream: ss, ctx: membudget.WithAccount(ss.Context(), a), a: a})
	}
}

// budgetedStream is a server stream whose context carries its account and
// whose received messages draw from it.
type budgetedStream struct {
	grpc.ServerStream
	ctx context.Context
	a   *membudget.Account
}

func (s *budgetedStream) Context() context.Context { return s.ctx }

func (s *budgetedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return drawMessage(s.ctx, s.a, m)
}

// drawMessage draws a received message's share from a.
func drawMessage(ctx context.Context, a *membudget.Account, m any) error {
	msg, ok := m.(proto.Message)
	if !ok {
		return nil
	}
	if err := a.Take(ctx, membudget.BodyCharge(int64(proto.Size(msg)))); err != nil {
		id, _ := m.(interface{ GetRequestId() string })
		var requestID string
		if id != nil {
			requestID = id.GetRequestId()
		}
		return apierror.BudgetStatus(err, requestID).Err()
	}
	return nil
}
