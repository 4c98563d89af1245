// Package procs starts the coordinator and the simulator as child
// processes on loopback for the tools under cmd/ that measure them from
// outside (coordinator-bench, coordinator-soak): it builds the binaries,
// starts each with its output in a log file, waits until it answers, and
// stops them all.
package procs
