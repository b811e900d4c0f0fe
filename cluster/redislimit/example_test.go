package redislimit_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/cluster/redislimit/redistest"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
	"github.com/redis/go-redis/v9"
)

// Two executors, standing for two processes, share a limit of 2 running
// tasks for tenant "acme": each could run 4 on its own. Every task gets a
// fencing token to show a downstream.
func Example() {
	srv, err := redistest.StartServer() // a real redis-server on a free loopback port
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	var mu sync.Mutex
	running, peak := 0, 0
	two := make(chan struct{}) // closed once two tasks run at once
	work := func(ctx context.Context) (bool, error) {
		mu.Lock()
		running++
		if running > peak {
			if peak = running; peak == 2 {
				close(two)
			}
		}
		mu.Unlock()
		<-two // the first task holds its permit until a second runs beside it
		mu.Lock()
		running--
		mu.Unlock()
		_, ok := redislimit.FencingToken(ctx)
		return ok, nil
	}

	p, _ := policy.New(policy.WithDefaultMaxConcurrency(4))
	var hs []*executor.Handle[bool]
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
		defer rdb.Close()
		h, err := redislimit.New(rdb, redislimit.WithPrefix("example"))
		if err != nil {
			log.Fatal(err)
		}
		defer h.Close()
		ex, err := executor.New(p, executor.WithGroupLimiter(h.Groups(2)))
		if err != nil {
			log.Fatal(err)
		}
		defer ex.Close()
		for range 8 {
			hd, _ := executor.Submit(ex, context.Background(), executor.Task[bool]{Group: "acme", Fn: work})
			hs = append(hs, hd)
		}
	}
	tokens := 0
	for _, hd := range hs {
		if r, _ := hd.Wait(context.Background()); r.Value {
			tokens++
		}
	}
	fmt.Println("tasks with a fencing token:", tokens)
	fmt.Println("most running at once:", peak)
	// Output:
	// tasks with a fencing token: 16
	// most running at once: 2
}
