// Package benchmarks measures groupexec against what a Go user would
// otherwise write or pick: hand-written golang.org/x/sync/semaphore code,
// pond, ants, failsafe-go, gobreaker, and for the gateway a bare
// httputil.ReverseProxy and nginx.
//
// It is its own module so that the peers never enter the main go.mod. The
// workloads are in _test.go files; run.sh makes one raw output per
// workload in results/, and go run ./cmd/benchplot draws the charts from
// them. README.md says what each workload is and what was measured.
package benchmarks
