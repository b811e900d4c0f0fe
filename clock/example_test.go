package clock_test

import (
	"fmt"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// A Fake moves only when told to, so code that waits on time can be tested
// without sleeping.
func ExampleFake() {
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := clock.NewFake(start)

	fired := make(chan string)
	c.AfterFunc(time.Second, func() { fired <- "after 1s" })
	late := c.AfterFunc(time.Minute, func() { fired <- "after 1m" })
	fmt.Println("pending:", c.Pending())

	// Timers fire, each in its own goroutine, once the time reaches them.
	fmt.Println("started:", c.Advance(500*time.Millisecond))
	fmt.Println("started:", c.Advance(500*time.Millisecond))
	fmt.Println(<-fired)

	fmt.Println("stopped:", late.Stop())
	fmt.Println("started:", c.Advance(time.Hour))
	fmt.Println("now:", c.Now().Sub(start), "pending:", c.Pending())
	// Output:
	// pending: 2
	// started: 0
	// started: 1
	// after 1s
	// stopped: true
	// started: 0
	// now: 1h0m1s pending: 0
}
