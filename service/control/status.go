package control

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
)

// errorDomain is the domain of the control plane's ErrorInfo details.
const errorDomain = "coordinator.control"

// maxNamed is how many failed workers a status message names.
const maxNamed = 8

// workerFailure is the status of a fan-out in which some worker failed:
// UNAVAILABLE naming the failed workers, with a ControlFailure detail
// holding every result (REST 502). nil when every worker succeeded.
func workerFailure(r route, results []*coordinatorv1.WorkerResult) error {
	f := &coordinatorv1.ControlFailure{Route: r.path, Results: results}
	var named []string
	for _, res := range results {
		id := res.GetWorker().GetId()
		if res.GetOk() {
			f.Changed = append(f.Changed, id)
			continue
		}
		f.Failed = append(f.Failed, id)
		if len(named) < maxNamed {
			named = append(named, id+" ("+res.GetError()+")")
		}
	}
	if len(f.Failed) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s failed on %d of %d workers: %s", r.path, len(f.Failed), len(results), strings.Join(named, ", "))
	if len(f.Failed) > maxNamed {
		msg += fmt.Sprintf(" and %d more", len(f.Failed)-maxNamed)
	}
	if len(f.Changed) > 0 {
		msg += fmt.Sprintf("; %d workers did change (ControlFailure.changed)", len(f.Changed))
	}
	return withDetails(codes.Unavailable, msg, f)
}

// membershipChanged is the status of a call that named an epoch other than
// the current one: FAILED_PRECONDITION with a MembershipChanged detail and
// an ErrorInfo of reason MEMBERSHIP_CHANGED (REST 409).
func membershipChanged(err error) error {
	var stale *fleet.StaleEpochError
	if !errors.As(err, &stale) {
		return status.Error(codes.Internal, err.Error())
	}
	d := &coordinatorv1.MembershipChanged{Epoch: stale.Have, CurrentEpoch: stale.Current}
	for _, w := range stale.Added {
		d.Added = append(d.Added, workerPB(w))
	}
	for _, w := range stale.Removed {
		d.Removed = append(d.Removed, workerPB(w))
	}
	return withDetails(codes.FailedPrecondition, err.Error()+": list the workers again", d,
		&errdetails.ErrorInfo{Reason: "MEMBERSHIP_CHANGED", Domain: errorDomain})
}

// withDetails is the status error of code and msg with details.
func withDetails(code codes.Code, msg string, details ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	for _, d := range details {
		if with, err := st.WithDetails(d); err == nil {
			st = with
		}
	}
	return st.Err()
}

// restError writes a control call's failure as grpc-gateway writes a
// status (its JSON: code, message, details), with the HTTP status of
// httpStatus.
func restError(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	body, merr := m.Marshal(st.Proto())
	if merr != nil {
		body = []byte(`{"code":13,"message":"failed to marshal the error"}`)
	}
	w.Header().Set("Content-Type", m.ContentType(st.Proto()))
	if st.Code() == codes.Unauthenticated {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	w.WriteHeader(httpStatus(st))
	_, _ = w.Write(body)
}

// httpStatus is the REST status of a control call's failure: 502 for a
// fan-out in which a worker failed, 409 for a stale epoch, else
// grpc-gateway's mapping of the code.
func httpStatus(st *status.Status) int {
	for _, d := range st.Details() {
		switch d.(type) {
		case *coordinatorv1.ControlFailure:
			return http.StatusBadGateway
		case *coordinatorv1.MembershipChanged:
			return http.StatusConflict
		}
	}
	return runtime.HTTPStatusFromCode(st.Code())
}
