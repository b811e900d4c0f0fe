package otel

import (
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// series are the attribute sets of one group label, made once: the listener
// records with them on every event without allocating.
type series struct {
	label     string
	group     metric.MeasurementOption    // {group}
	completed [3]metric.MeasurementOption // {group, status}: success, failed, cancelled

	mu       sync.Mutex
	rejected map[string]metric.MeasurementOption // {group, limit}, by limit label
}

func newSeries(label string) *series {
	g := attribute.String("group", label)
	s := &series{label: label, group: metric.WithAttributeSet(attribute.NewSet(g)), rejected: make(map[string]metric.MeasurementOption)}
	for i, st := range []string{"success", "failed", "cancelled"} {
		s.completed[i] = metric.WithAttributeSet(attribute.NewSet(g, attribute.String("status", st)))
	}
	return s
}

func (s *series) rejectedBy(limit string) metric.MeasurementOption {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.rejected[limit]
	if !ok {
		o = metric.WithAttributeSet(attribute.NewSet(attribute.String("group", s.label), attribute.String("limit", limit)))
		s.rejected[limit] = o
	}
	return o
}

// groups bounds the groups with series of their own, as metrics/prom does:
// the ones labelled accepts or, without it, the first max seen.
type groups struct {
	labelled func(string) bool
	max      int

	mu    sync.RWMutex
	known map[string]*series // groups with series of their own
	other *series
}

func newGroups(labelled func(string) bool, max int) *groups {
	return &groups{labelled: labelled, max: max, known: make(map[string]*series), other: newSeries(OtherGroup)}
}

// of returns group's series, admitting it to series of its own if there is
// room.
func (gs *groups) of(group string) *series {
	if group == OtherGroup {
		// Its series is the remainder's: one of its own would be
		// observed twice, the remainder overwriting it.
		return gs.other
	}
	if !utf8.ValidString(group) {
		// An exporter cannot send it (OTLP's strings are UTF-8): it would
		// fail every export that holds its series.
		return gs.other
	}
	if group == "" {
		// Not a group: the executor refuses such a task as invalid. A
		// place of its own would take one of MaxGroups from a real group.
		return gs.other
	}
	if len(group) > MaxGroupLen {
		// A client-chosen key of any length would be kept by the SDK and
		// sent in every point of the group on every export, for good.
		return gs.other
	}
	gs.mu.RLock()
	s, ok := gs.known[group]
	full := gs.labelled == nil && len(gs.known) >= gs.max
	gs.mu.RUnlock()
	switch {
	case ok:
		return s
	case full, gs.labelled != nil && !gs.labelled(group):
		return gs.other
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if s, ok := gs.known[group]; ok {
		return s
	}
	if gs.labelled == nil && len(gs.known) >= gs.max {
		return gs.other
	}
	s = newSeries(group)
	gs.known[group] = s
	return s
}

// labelledGroups returns the groups with series of their own.
func (gs *groups) labelledGroups() map[string]*series {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	m := make(map[string]*series, len(gs.known))
	for g, s := range gs.known {
		m[g] = s
	}
	return m
}
