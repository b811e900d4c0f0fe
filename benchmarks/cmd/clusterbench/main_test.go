package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
)

// TestMain runs this test binary as a bench child when the parent set
// childEnv (the smoke test re-executes it), and otherwise fails the run if
// a goroutine outlives the tests.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(childMain(cfg))
	}
	goleak.VerifyTestMain(m)
}

func testParams(t *testing.T, addr string) params {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return params{redis: addr, rounds: 2, tasks: 3000, batch: 1000, procs: []int{1, 2}, exe: exe, guard: 2 * time.Minute}
}

// The whole bench at tiny numbers against a redistest server: every
// variant runs in child processes, every child reports its tasks, the
// Redis variants count round trips, and the summary is printed. The numbers
// themselves are not checked: at these sizes, on a shared CI machine, they
// are noise.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and child processes")
	}
	srv := redistest.Start(t)
	p := testParams(t, srv.Addr())
	var out bytes.Buffer
	runs, err := run(context.Background(), &out, p)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, n := range p.procs {
		for _, v := range []variant{{false, n}, {true, n}} {
			ms := runs[v]
			if len(ms) != p.rounds {
				t.Fatalf("%v: %d runs, want %d", v, len(ms), p.rounds)
			}
			for _, m := range ms {
				if len(m.children) != n {
					t.Fatalf("%v: %d child results, want %d", v, len(m.children), n)
				}
				for i, c := range m.children {
					if c.Tasks != int64(p.tasks) || c.Ran != int64(p.tasks) || c.Elapsed <= 0 {
						t.Errorf("%v child %d: %d tasks (%d ran) in %v, want %d", v, i, c.Tasks, c.Ran, c.Elapsed, p.tasks)
					}
					if v.redis && c.RTTotal == 0 {
						t.Errorf("%v child %d counted no round trip", v, i)
					}
					if !v.redis && c.RTTotal != 0 {
						t.Errorf("%v child %d counted %d round trips without Redis", v, i, c.RTTotal)
					}
				}
				if m.tps() <= 0 || m.tasks != int64(n*p.tasks) {
					t.Errorf("%v: %d tasks at %.0f/s", v, m.tasks, m.tps())
				}
			}
		}
	}
	s := out.String()
	for _, want := range []string{"round 2 redis x2:", "| Redis limits, shared | 2 |", "| local limits only | 1 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	t.Log("\n" + s)
}

// A child that fails makes the run fail, with the child's words, and
// leaves no child behind (the other children are killed and waited for;
// goleak checks the readers ended).
func TestChildFailureFailsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	p := testParams(t, "127.0.0.1:1") // nothing listens there: children cannot reach Redis
	p.rounds, p.procs = 1, []int{2}
	cfg := childConfig{Addr: p.redis, Prefix: "x", Tasks: p.tasks, Batch: p.batch}
	_, err := runVariant(context.Background(), p, variant{true, 2}, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "redis at 127.0.0.1:1") {
		t.Fatalf("err = %v, want a child's failure to reach Redis", err)
	}
}

// A parent that gives up (here its guard ends while the children run far
// more tasks than they could in the time) kills its children and waits for
// them before it returns.
func TestGuardKillsChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	p := testParams(t, "")
	p.guard = time.Second
	start := time.Now()
	_, err := runVariant(context.Background(), p, variant{false, 2}, childConfig{Tasks: 1_000_000_000, Batch: 1000}, nil)
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err = %v, want the guard's deadline", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("runVariant took %v to give up", d)
	}
}

// A child whose stdin closes (its parent is gone) exits at once, before or
// after "go", rather than run on as an orphan.
func TestChildExitsWhenParentGoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sendGo := range []bool{false, true} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+`={"tasks":1000000000,"batch":1000}`)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err == nil && line != "READY\n" {
				err = fmt.Errorf("child printed %q, want READY", line)
			}
			if err == nil && sendGo {
				_, err = io.WriteString(stdin, "go\n")
			}
			stdin.Close()
			werr := cmd.Wait()
			done <- errors.Join(err, werr)
		}()
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Errorf("go sent %v: child ended with %v, want exit status 3", sendGo, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("go sent %v: the child ran on after its stdin closed", sendGo)
		}
	}
}
