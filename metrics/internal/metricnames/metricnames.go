// Package metricnames holds the names, help texts and label values that
// metrics/prom and metrics/otel share, so that a dashboard works with either
// exporter and the two cannot drift apart.
package metricnames

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// OtherGroup is the group label of every group without series of its own.
const OtherGroup = "_other"

// DefaultMaxGroups is how many groups get series of their own by default.
const DefaultMaxGroups = 100

// MaxGroupLen is the longest group key, in bytes, that gets series of its
// own. Every series repeats its group label in every scrape or export, for
// the life of the process, and a client can choose a key as long as its
// transport allows (a megabyte of header): MaxGroups bounds the number of
// groups, this bounds what each costs. Backends refuse longer label values
// too (Mimir and Cortex from 2048 bytes, Prometheus's scrape option
// label_value_length_limit fails the whole scrape).
const MaxGroupLen = 256

// A Metric is an instrument's name, without namespace, and its help text.
type Metric struct{ Name, Help string }

// The executor's metrics that both exporters give.
var (
	Rejected     = Metric{"group_rejected_total", "Tasks refused, by group and the limit that refused them."}
	Completed    = Metric{"group_completed_total", "Tasks completed, by group and status (success, failed, cancelled)."}
	Queued       = Metric{"group_queued_seconds", "Time from submit to start of the tasks that started."}
	Run          = Metric{"group_run_seconds", "Time the tasks ran."}
	QueueDepth   = Metric{"queue_depth", "Tasks waiting to start."}
	Running      = Metric{"executor_running_permits", "Permits running across all groups."}
	Groups       = Metric{"executor_groups", "Groups whose state the executor keeps (busy, idle or shut down)."}
	GroupRunning = Metric{"group_running_tasks", "Tasks running, by group."}
	GroupWaiting = Metric{"group_waiting_tasks", "Tasks waiting, by group."}
)

// The executor's limits and its groups' breakers, read from Stats and
// GroupStats. The group ones are given for the groups with series of their
// own that the executor keeps: the remainder under OtherGroup sums groups
// with limits of their own, which no one number describes. A limit that
// bounds nothing is policy.Unlimited, exported as that number: their help
// texts say so (noLimit), since a dashboard sees only the number.
var (
	GlobalMaxInFlight   = Metric{"executor_global_max_in_flight", "The global in-flight limit, in permits" + noLimit}
	GroupMaxInFlight    = Metric{"group_max_in_flight", "The group's in-flight limit (its bulkhead), in permits" + noLimit}
	GroupMaxConcurrency = Metric{"group_max_concurrency", "The group's concurrency limit, in permits" + noLimit}
	GroupBreakerState   = Metric{"group_breaker_state", "The group's circuit breaker: 0 closed, 1 open, 2 half-open."}
)

// noLimit ends the help text of a limit's gauge: what it reads when the
// limit bounds nothing, policy.Unlimited (math.MaxInt), exported as that
// number: 9223372036854775807 on a 64-bit platform, which Prometheus's
// float64 samples show as 9.223372036854776e+18 and PromQL's literal
// 9223372036854775807 equals. A level never reaches it and a ratio of a
// level to it is 0, so a saturation alert needs no case of its own for it.
var noLimit = "; " + strconv.Itoa(policy.Unlimited) + " (policy.Unlimited) when unlimited."

// LimitLabel names, as a label value, the limit that refused a task with
// err: executor.Limit with spaces as underscores ("group_in-flight"), or
// "other" for an error that names none of the executor's limits.
//
// executor.Limit is a string type that anyone can convert any string to, and
// a Collector is a Listener that counts what its caller tells it: a Limit of
// the caller's making, taken as it is, would be a label value of any length
// and number (a series each, kept for good), or one that is not valid UTF-8,
// which Prometheus's WithLabelValues panics on. Only the executor's own
// limits, a fixed set, get labels of their own.
func LimitLabel(err error) string {
	var re *executor.RejectedError
	if errors.As(err, &re) {
		if l, ok := limitLabels[re.Limit]; ok {
			return l
		}
	}
	return "other"
}

// limitLabels are the label values of the executor's limits.
var limitLabels = func() map[executor.Limit]string {
	m := make(map[executor.Limit]string)
	for _, l := range []executor.Limit{
		executor.LimitGlobalInFlight, executor.LimitGroupInFlight, executor.LimitGroupConcurrency,
		executor.LimitGlobalQueue, executor.LimitGroupQueue, executor.LimitQueueTimeout,
		executor.LimitShutdown, executor.LimitBreaker, executor.LimitResolver, executor.LimitInvalid,
		executor.LimitClusterGlobal, executor.LimitClusterGroup,
	} {
		m[l] = strings.ReplaceAll(string(l), " ", "_")
	}
	return m
}()

// Seconds is d in seconds, as the histograms record a task's wait and run
// time: a negative d is 0. An injected clock (executor.WithClock) set back
// gives a task one, durations being differences of its Now (a clock that
// reads the wall time without Go's monotonic reading, time.Now().UTC(),
// stepped back by NTP). Recorded, it would lower the histogram's sum, which
// Prometheus reads as a counter, its rate() taking the drop for a reset,
// and which OpenTelemetry exports as monotonic: its histograms take
// non-negative values.
func Seconds(d time.Duration) float64 { return max(d, 0).Seconds() }

// ValidBuckets reports whether b are histogram bucket bounds both exporters
// accept: numbers (no NaN) in strictly increasing order. Prometheus refuses
// others when the first series of a histogram is made; an OpenTelemetry SDK
// replaces them with its own defaults, or keeps a NaN that misplaces every
// observation.
func ValidBuckets(b []float64) bool {
	for i, v := range b {
		if math.IsNaN(v) || i > 0 && v <= b[i-1] {
			return false
		}
	}
	return true
}
