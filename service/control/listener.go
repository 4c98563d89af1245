package control

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// maxMessageBytes caps a control call's request (a relay with a body per
// worker of a large fleet) and answer.
const maxMessageBytes = 16 << 20

// newHandler is the control listener's handler: every request must carry
// the bearer token (when token is set); gRPC calls (HTTP/2,
// application/grpc) go to the ControlService's gRPC server, the rest to
// its REST transcoding under /v1/rl/ (anything else: 404).
func newHandler(srv *Server, token string, m *metrics.Control) http.Handler {
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor()))
	coordinatorv1.RegisterControlServiceServer(gs, srv)
	mux := runtime.NewServeMux(
		runtime.WithErrorHandler(restError),
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{},
		}),
	)
	// Registering a server of the generated type on a new mux cannot fail.
	_ = coordinatorv1.RegisterControlServiceHandlerServer(context.Background(), mux, srv)
	want := []byte("Bearer " + token)
	propagator := otel.GetTextMapPropagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isGRPC := r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			m.Call("auth", metrics.ControlUnauthenticated, 0)
			refuse(w, isGRPC)
			return
		}
		r = r.WithContext(propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		if isGRPC {
			gs.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxMessageBytes)
		mux.ServeHTTP(w, r)
	})
}

// unauthenticated is the refusal's message.
const unauthenticated = "control: missing or invalid bearer token (Authorization: Bearer <control.token_file>)"

// refuse answers a call without the token: gRPC UNAUTHENTICATED as a
// trailers-only answer, or REST 401 with the status JSON.
func refuse(w http.ResponseWriter, isGRPC bool) {
	h := w.Header()
	if isGRPC {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", "16")
		h.Set("Grpc-Message", unauthenticated)
		w.WriteHeader(http.StatusOK)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("WWW-Authenticate", "Bearer")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = fmt.Fprintf(w, `{"code":16,"message":%q,"details":[]}`, unauthenticated)
}

// readToken reads the token file: its content, surrounding whitespace
// dropped; "" when path is "". An empty file is an error (it would turn
// the check off).
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("control.token_file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("control.token_file: %s is empty", path)
	}
	return token, nil
}

// listener serves the handler on the control address.
type listener struct {
	srv *http.Server
	log *slog.Logger
}

// newListener is the control listener's server: HTTP/1.1 and HTTP/2 (h2c
// without TLS, for gRPC), no write timeout (a weight update takes
// minutes; each worker's call has control.call_timeout).
func newListener(h http.Handler, tlsConfig *tls.Config, log *slog.Logger) *listener {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	if tlsConfig == nil {
		p.SetUnencryptedHTTP2(true)
	}
	return &listener{log: log, srv: &http.Server{
		Handler: h, TLSConfig: tlsConfig, Protocols: &p,
		ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute, MaxHeaderBytes: 64 << 10,
	}}
}

// serve serves on lis until close.
func (l *listener) serve(lis net.Listener) {
	var err error
	if l.srv.TLSConfig != nil {
		err = l.srv.ServeTLS(lis, "", "")
	} else {
		err = l.srv.Serve(lis)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Error("control listener", "error", err)
	}
}

// close stops accepting and waits for the calls in flight until ctx ends,
// then closes what is left.
func (l *listener) close(ctx context.Context) error {
	if err := l.srv.Shutdown(ctx); err != nil {
		return l.srv.Close()
	}
	return nil
}
