package executor

import (
	"context"
	"testing"
)

// A group's context (groupCtx) is done once Err answers an error: its stop
// is set a moment before the Done channel handed out is closed (stopRuns
// under runMu, endKeptContexts before it takes runMu), and Err asked in
// that moment must not answer an error while Done is still open. Then the
// stop's own close does not close the channel again.
func TestGroupContextErrAnswersOnlyOnceDoneIsClosed(t *testing.T) {
	for name, stop := range map[string]func(*group){
		"stopRuns":        func(g *group) { g.stopRuns(context.Canceled) },
		"endKeptContexts": (*group).endKeptContexts,
	} {
		g := &group{key: "g"}
		ctx := (*groupCtx)(g)
		done := ctx.Done()
		g.stop.Store(droppedStop) // the stop is set; its close is to come
		if err := ctx.Err(); err != nil {
			select {
			case <-done:
			default:
				t.Errorf("%s: Err = %v while Done is open", name, err)
			}
		}
		stop(g) // finds the stop set: must not close the channel again
		select {
		case <-done:
		default:
			t.Errorf("%s: Done is open once stopped", name)
		}
		if d := ctx.Done(); d != closedChan {
			t.Errorf("%s: Done asked once stopped is not closed", name)
		}
	}
}
