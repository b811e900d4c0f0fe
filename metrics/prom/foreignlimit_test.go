package prom_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
)

// A refusal naming a limit the executor does not have (executor.Limit is a
// string type anyone can convert to) is counted under limit="other": taken
// as it is, a Limit that is not valid UTF-8 panicked in WithLabelValues,
// and a caller's made-up limits each made a series of their own, for good.
func TestForeignLimitsCountAsOther(t *testing.T) {
	c := prom.New(prom.Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	reject := func(l executor.Limit) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("OnRejected with limit %q panicked: %v", l, r)
			}
		}()
		c.OnRejected(executor.Event{Group: "g", Err: &executor.RejectedError{Group: "g", Limit: l}})
	}
	reject("x\xff")
	for i := range 50 {
		reject(executor.Limit("made up " + strconv.Itoa(i)))
	}
	reject(executor.LimitGroupInFlight)

	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "group_rejected_total" {
			for _, m := range mf.Metric {
				got[label(m, "limit")] += m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"other": 51, "group_in-flight": 1}
	if len(got) != len(want) || got["other"] != want["other"] || got["group_in-flight"] != want["group_in-flight"] {
		t.Errorf("group_rejected_total by limit: %v, want %v", got, want)
	}
	if l := prom.LimitLabel(&executor.RejectedError{Limit: "made up"}); l != "other" {
		t.Errorf("LimitLabel of a made-up limit: %q, want other", l)
	}
}

// Each of the executor's limits keeps a label of its own: the documented
// values, executor.Limit with spaces as underscores.
func TestEveryExecutorLimitHasItsLabel(t *testing.T) {
	for l, want := range map[executor.Limit]string{
		executor.LimitGlobalInFlight: "global_in-flight", executor.LimitGroupInFlight: "group_in-flight",
		executor.LimitGroupConcurrency: "group_concurrency", executor.LimitGlobalQueue: "global_queue_threshold",
		executor.LimitGroupQueue: "group_queue_threshold", executor.LimitQueueTimeout: "queue_timeout",
		executor.LimitShutdown: "shutdown", executor.LimitBreaker: "circuit_breaker",
		executor.LimitResolver: "limit_resolver", executor.LimitInvalid: "invalid_task",
		executor.LimitClusterGlobal: "cluster_global_limiter", executor.LimitClusterGroup: "cluster_group_limiter",
	} {
		if got := prom.LimitLabel(&executor.RejectedError{Limit: l}); got != want {
			t.Errorf("LimitLabel(%q) = %q, want %q", l, got, want)
		}
	}
}

// Every Limit constant the executor declares has a label of its own: one
// added to the executor but not to the labels would be counted under
// "other", with the limits the executor does not have.
func TestEveryDeclaredExecutorLimitHasALabel(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", "..", "executor", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if typ, ok := v.Type.(*ast.Ident); !ok || typ.Name != "Limit" {
					continue
				}
				for _, val := range v.Values {
					lit, ok := val.(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: a Limit constant that is not a literal", fset.Position(val.Pos()))
					}
					l, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					found++
					want := strings.ReplaceAll(l, " ", "_")
					if got := prom.LimitLabel(&executor.RejectedError{Limit: executor.Limit(l)}); got != want {
						t.Errorf("LimitLabel(%q) = %q, want %q", l, got, want)
					}
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("found no Limit constant in the executor's sources")
	}
}
