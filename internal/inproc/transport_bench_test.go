package inproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fullstorydev/grpchan/inprocgrpc"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// BenchmarkInProcessTransport measures one call through the Channel against
// the same call through grpc-go over bufconn (a real server and client,
// HTTP/2 and protobuf over an in-memory listener) and through grpchan's
// inprocgrpc (a handler goroutine a call, messages cloned), so the reason to
// own the transport stays measured. Every transport serves the same fake
// with a no-op unary and stream interceptor; the caller passes grpc.Header
// and grpc.Trailer, as grpc-gateway does. Shapes: a unary Generate with a
// ~2 KiB chat body and reply, and a GenerateStream of 32 ~100-byte chunks.
// Besides ns/op, B/op and allocs/op, each row reports the process's CPU an
// op (cpu-ns/op: unlike the wall time, it does not count waiting for other
// processes) and its ns/op, cpu-ns/op and allocs/op over bufconn's in the
// same run (x-bufconn-ns, x-bufconn-cpu, x-bufconn-allocs; with -count,
// over bufconn's last run, since each row runs count times before the next).
func BenchmarkInProcessTransport(b *testing.B) {
	svc := newBenchService()
	for _, shape := range benchShapes {
		var base opCost
		for _, tr := range benchTransports {
			b.Run(shape.name+"/"+tr.name, func(b *testing.B) {
				client, closeAll := tr.dial(b, svc)
				defer closeAll()
				b.ReportAllocs()
				cost := measure(b, shape.op(svc, client, tr.handOver))
				b.ReportMetric(cost.cpu, "cpu-ns/op")
				if tr.name == "bufconn" {
					base = cost
				}
				if base.ns > 0 {
					b.ReportMetric(cost.ns/base.ns, "x-bufconn-ns")
					b.ReportMetric(cost.cpu/max(base.cpu, 1), "x-bufconn-cpu")
					b.ReportMetric(cost.allocs/max(base.allocs, 1), "x-bufconn-allocs")
				}
			})
		}
	}
}

// opCost is what an op cost: wall and process CPU time in ns, allocations.
type opCost struct{ ns, cpu, allocs float64 }

// measure runs op once untimed (bufconn's client connects at its first
// call), then in b's loop, and returns its cost an op, as the testing
// package reports it, for the ratios to bufconn.
func measure(b *testing.B, op func() error) opCost {
	if err := op(); err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := processCPU(b)
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	cpu = processCPU(b) - cpu
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	return opCost{ns: float64(b.Elapsed().Nanoseconds()) / n, cpu: float64(cpu.Nanoseconds()) / n,
		allocs: float64(after.Mallocs-before.Mallocs) / n}
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchTransportsAnswer runs each benchmarked call once on each
// transport: every one gets the fake's exact reply and chunks, and closing
// the transports leaves no goroutine (TestMain's goleak).
func TestBenchTransportsAnswer(t *testing.T) {
	t.Parallel()
	svc := newBenchService()
	for _, tr := range benchTransports {
		client, closeAll := tr.dial(t, svc)
		for _, shape := range benchShapes {
			op := shape.op(svc, client, tr.handOver)
			for range 2 {
				require.NoError(t, op(), "%s/%s", shape.name, tr.name)
			}
		}
		closeAll()
	}
}

// benchService is the fake every transport serves: a fixed reply, and a
// stream of fixed chunks sent in one reused message, as the service does.
type benchService struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	request []byte   // the chat body a unary call and a stream send
	reply   []byte   // the unary answer
	chunks  [][]byte // the stream's events
	data    [][][]byte
}

func newBenchService() *benchService {
	content := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) // 1,800 bytes
	s := &benchService{
		request: fmt.Appendf(nil, `{"model":"bench","messages":[{"role":"system","content":"You are terse."},`+
			`{"role":"user","content":%q}],"max_tokens":64,"temperature":0}`, content),
		reply: fmt.Appendf(nil, `{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":420,"completion_tokens":400,"total_tokens":820}}`, content),
	}
	for i := range 32 {
		chunk := fmt.Appendf(nil, `{"id":"chatcmpl-bench","model":"bench","choices":[{"index":0,"delta":{"content":"token %02d"}}]}`, i)
		s.chunks = append(s.chunks, chunk)
		s.data = append(s.data, [][]byte{chunk})
	}
	return s
}

func (s *benchService) Generate(ctx context.Context, req *coordinatorv1.GenerateRequest) (*coordinatorv1.GenerateResponse, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-request-id", req.GetRequestId()))
	return &coordinatorv1.GenerateResponse{RequestId: req.GetRequestId(), Output: &coordinatorv1.GenerateResponse_Openai{
		Openai: &coordinatorv1.OpenAIResponse{StatusCode: 200, ContentType: "application/json", Json: s.reply}}}, nil
}

func (s *benchService) GenerateStream(req *coordinatorv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	if err := stream.SetHeader(metadata.Pairs("x-request-id", req.GetRequestId())); err != nil {
		return err
	}
	events := &coordinatorv1.OpenAIEvents{}
	msg := &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Openai{Openai: events}}
	for _, data := range s.data {
		events.Data = data
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

// benchShapes are the calls measured: op makes one call on client (with a
// HandOver record a call when handOver, as the REST front) and checks its
// answer.
var benchShapes = []struct {
	name string
	op   func(s *benchService, client coordinatorv1.CoordinatorServiceClient, handOver bool) func() error
}{
	{name: "unary", op: unaryOp},
	{name: "stream32", op: streamOp},
}

func callContext(handOver bool) (context.Context, *HandOver) {
	if handOver {
		return withHandOver(context.Background())
	}
	return context.Background(), nil
}

func unaryOp(s *benchService, client coordinatorv1.CoordinatorServiceClient, handOver bool) func() error {
	req := &coordinatorv1.GenerateRequest{RequestId: "bench-1", Input: &coordinatorv1.GenerateRequest_Openai{
		Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: s.request}}}
	return func() error {
		ctx, _ := callContext(handOver)
		var header, trailer metadata.MD
		resp, err := client.Generate(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			return err
		}
		if !bytes.Equal(resp.GetOpenai().GetJson(), s.reply) || len(header.Get("x-request-id")) != 1 {
			return errors.New("unary: wrong answer")
		}
		return nil
	}
}

func streamOp(s *benchService, client coordinatorv1.CoordinatorServiceClient, handOver bool) func() error {
	req := &coordinatorv1.GenerateStreamRequest{RequestId: "bench-1", Input: &coordinatorv1.GenerateStreamRequest_Openai{
		Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: s.request}}}
	return func() error {
		ctx, h := callContext(handOver)
		defer h.End()
		var header, trailer metadata.MD
		stream, err := client.GenerateStream(ctx, req, grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			return err
		}
		for i := 0; ; i++ {
			msg, err := stream.Recv()
			switch {
			case errors.Is(err, io.EOF) && i == len(s.chunks):
				return nil
			case err != nil:
				return err
			case i == len(s.chunks) || !bytes.Equal(msg.GetOpenai().GetData()[0], s.chunks[i]):
				return fmt.Errorf("stream: wrong chunk %d", i)
			}
		}
	}
}

// benchTransports are the transports measured, bufconn first: the others'
// ratios are to it. dial serves svc and returns a client and what closes
// everything dial started.
var benchTransports = []struct {
	name     string
	handOver bool
	dial     func(tb testing.TB, svc coordinatorv1.CoordinatorServiceServer) (coordinatorv1.CoordinatorServiceClient, func())
}{
	{name: "bufconn", dial: dialBufconn},
	{name: "inproc", dial: dialChannel},
	{name: "inproc-handover", handOver: true, dial: dialChannel},
	{name: "grpchan", dial: dialGRPChan},
}

func noopUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(ctx, req)
}

func noopStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, ss)
}

func dialChannel(_ testing.TB, svc coordinatorv1.CoordinatorServiceServer) (coordinatorv1.CoordinatorServiceClient, func()) {
	ch := NewChannel(&coordinatorv1.CoordinatorService_ServiceDesc, svc, Options{
		Unary: noopUnary, Stream: noopStream, MaxRecv: 4 << 20, Pass: passByReference})
	return coordinatorv1.NewCoordinatorServiceClient(ch), ch.Close
}

func dialBufconn(tb testing.TB, svc coordinatorv1.CoordinatorServiceServer) (coordinatorv1.CoordinatorServiceClient, func()) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.UnaryInterceptor(noopUnary), grpc.StreamInterceptor(noopStream))
	coordinatorv1.RegisterCoordinatorServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		<-served
		tb.Fatal(err)
	}
	return coordinatorv1.NewCoordinatorServiceClient(conn), func() {
		_ = conn.Close()
		srv.Stop()
		if err := <-served; err != nil {
			tb.Error(err)
		}
	}
}

func dialGRPChan(_ testing.TB, svc coordinatorv1.CoordinatorServiceServer) (coordinatorv1.CoordinatorServiceClient, func()) {
	ch := (&inprocgrpc.Channel{}).WithServerUnaryInterceptor(noopUnary).WithServerStreamInterceptor(noopStream)
	ch.RegisterService(&coordinatorv1.CoordinatorService_ServiceDesc, svc)
	return coordinatorv1.NewCoordinatorServiceClient(ch), func() {}
}
