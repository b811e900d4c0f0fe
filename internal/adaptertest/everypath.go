package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// EveryPath sends ex tasks down every path a task can take, from four
// goroutines over nine groups: Submit, Do and Go, a third of them failing;
// refused by a full group under ex's rejection policy; cancelled while
// waiting or before submission; invalid (an empty group); refused by a
// group shut down on the way. It then shuts ex down, which waits for the
// Go tasks, so that the caller reads quiescent counts. The metrics
// exporters' tests check their sums against ex.Stats after it.
func EveryPath(t *testing.T, ex *executor.Executor) {
	t.Helper()
	boom := errors.New("boom")
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ctx := context.Background()
			for i := range 150 {
				g := fmt.Sprint("g", (w+i)%9)
				fail := func(context.Context) error {
					if i%3 == 0 {
						return boom
					}
					return nil
				}
				submit := func(ctx context.Context) {
					h, err := executor.Submit(ex, ctx, executor.Task[int]{Group: g, Fn: func(ctx context.Context) (int, error) { return 0, fail(ctx) }})
					if err == nil {
						h.Wait(context.Background())
					}
				}
				switch i % 8 {
				case 0:
					_ = ex.Do(ctx, g, fail)
				case 1:
					_ = ex.Go(ctx, g, fail)
				case 2:
					_ = ex.Do(ended, g, fail)
				case 3:
					_ = ex.Go(ctx, "", fail) // invalid
				case 4:
					cctx, c := context.WithCancel(ctx)
					h, err := executor.Submit(ex, cctx, executor.Task[int]{Group: g, Fn: func(ctx context.Context) (int, error) { return 0, fail(ctx) }})
					c()
					if err == nil {
						h.Wait(ctx)
					}
				case 5:
					if i%40 == 5 {
						_ = ex.ShutdownGroup(ctx, g)
					}
					submit(ctx)
				default:
					submit(ctx)
				}
			}
		})
	}
	wg.Wait()
	if err := ex.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
