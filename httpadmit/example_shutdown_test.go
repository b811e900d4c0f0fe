package httpadmit_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A graceful shutdown: stop the server first, which closes the listener and
// waits for the requests in Handler, running or still waiting for a slot; then
// the executor, for the work requests left behind (Submit, Go). Serve returns
// http.ErrServerClosed as soon as Shutdown begins, so the program waits for
// Shutdown, not for Serve, before it exits. In a program, stop is
// signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt).
func ExampleHandler_shutdown() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(1), policy.WithQueueTimeout(time.Second))
	ex, _ := executor.New(p)
	defer ex.Close()

	entered, release := make(chan struct{}), make(chan struct{})
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		fmt.Fprintln(w, "done")
	})
	srv := &http.Server{Handler: httpadmit.Handler(ex, api)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	url := "http://" + ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	inFlight := make(chan string)
	go func() { inFlight <- fetch(url, "acme") }()
	<-entered // a request is running when SIGTERM comes

	stop, sigterm := context.WithCancel(context.Background())
	sigterm()
	<-stop.Done()
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			drained <- err
			return
		}
		drained <- ex.Shutdown(ctx)
	}()
	fmt.Println("Serve:", <-served) // at once, while the request still runs
	close(release)
	fmt.Print(<-inFlight) // answered in full
	fmt.Println("Shutdown:", <-drained)
	_, err = http.Get(url)
	fmt.Println("new connections refused:", err != nil)
	// Output:
	// Serve: http: Server closed
	// acme: 200 done
	// Shutdown: <nil>
	// new connections refused: true
}
