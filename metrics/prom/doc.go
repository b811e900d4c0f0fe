// Package prom exports a grouped executor's activity to Prometheus.
//
// A Collector is both an executor.Listener, which counts outcomes and times
// tasks as they happen, and a prometheus.Collector, which reads the
// executor's Stats and GroupStats at scrape time for what is a level rather
// than an event (running and waiting tasks):
//
//	c := prom.New(prom.Options{})
//	ex, _ := executor.New(p, executor.WithListener(c))
//	c.Observe(ex)
//	prometheus.MustRegister(c)
//
// It lives in a package of its own so that the executor, policy and breaker
// packages never import Prometheus: only programs that want these metrics
// compile it.
//
// Group keys are often attacker-controlled (a tenant header), and every
// distinct label value is a time series kept for the life of the process. So
// only the groups Options.Labelled accepts get series of their own (by
// default the first Options.MaxGroups groups seen); all others are summed
// under the group label OtherGroup, as are the groups whose key is not valid
// UTF-8, which no label value may hold, those whose key is longer than
// MaxGroupLen bytes, which every scrape would repeat in each of their
// series, and the refusals of tasks with an empty group key (invalid), which
// take no place of their own.
//
// Metrics (names as listed; Options.Namespace prefixes them):
//
//	queue_depth{queue="global"}              tasks waiting, all groups
//	executor_running_permits                 permits running, all groups
//	executor_groups                          groups whose state is kept
//	group_running_tasks{group}               tasks running
//	group_waiting_tasks{group}               tasks waiting
//	group_rejected_total{group,limit}        tasks refused, by the limit that refused them
//	group_completed_total{group,status}      tasks completed: success, failed, cancelled
//	group_queued_seconds{group}              time from submit to start (histogram)
//	group_run_seconds{group}                 time tasks ran (histogram)
//
// A task the rejection policy runs in its caller (CallerRuns, a rejection
// handler's RunInCaller) is counted in both group_rejected_total, since a
// limit refused it, and group_completed_total, since it ran; Stats counts
// it in CallerRuns and by its outcome, not in Rejected.
//
// ExampleNew (example_test.go), run by go test, gathers a Collector's
// metrics from a registry.
package prom
