// Package control is the RL control plane: the ControlService, which lists
// the inference engines behind the pipeline's roles and pauses, relabels,
// resumes, aborts and relays their own control routes (vLLM's /pause,
// /resume, /update_weight_version, /abort_requests, the weight-transfer
// routes), one call fanning out to every engine it targets.
//
// A call goes:
//
//	listener.go  the control listener: bearer token, gRPC and REST (/v1/rl/) on one port
//	server.go    the RPCs: refresh the membership, check the caller's epoch, fan out
//	fanout.go    bounded concurrency, a timeout and a span per worker, one result each
//	engine.go    one HTTP call to one engine's route, its answer capped
//	status.go    the failures: ControlFailure (UNAVAILABLE, REST 502), MembershipChanged (FAILED_PRECONDITION, REST 409)
//
// The membership (which engines exist per role, with an epoch) is
// internal/fleet's; the hold of new inference requests during a pause is
// admission's (admission.Hold), closed by Pause and opened by a Resume
// that leaves no engine paused through the coordinator.
package control
