package redislimit_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/redis/go-redis/v9"
)

// replyCutter makes a client's connections lose, once armed, the reply to
// the first request that names match, after Redis has run it: the
// connection reads the start of the reply from Redis, then fails as one
// cut between Redis and the client would. A client with retries (go-redis
// retries 3 times unless MaxRetries is -1) then sends the same pipeline
// again, on a new connection.
type replyCutter struct {
	match []byte
	armed atomic.Bool
	fired chan struct{}
}

func (rc *replyCutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, rc: rc}, nil
}

type cutConn struct {
	net.Conn
	rc  *replyCutter
	cut atomic.Bool
}

func (c *cutConn) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.rc.match) && c.rc.armed.CompareAndSwap(true, false) {
		c.cut.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.cut.Load() {
		var first [1]byte
		_, _ = io.ReadFull(c.Conn, first[:]) // Redis has run the request
		_ = c.Conn.Close()
		close(c.rc.fired)
		return 0, io.ErrUnexpectedEOF
	}
	return c.Conn.Read(b)
}

// TestGrantSentAgainByTheClientIsGivenBack: the reply to a refill that Redis
// granted is lost, and the client (one with retries) sends the same request
// again. Redis runs the same request only once: the second reply leases
// nothing, and tells that it ran before (version 0). The holder does not
// take it for a refusal: the lease of the first reply, which no one here
// knows of, is given back by its id, and the key asked for again, so that
// the task of the limit-1 key runs now, rather than after the lease TTL
// (minutes here), when that lease would expire in Redis.
func TestGrantSentAgainByTheClientIsGivenBack(t *testing.T) {
	addr := startRedis(t)
	rc := &replyCutter{match: []byte("{group:victim}:l"), fired: make(chan struct{})}
	c := redis.NewClient(&redis.Options{Addr: addr, Dialer: rc.dial, MaxRetries: 1, Protocol: 2,
		DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	h, err := redislimit.New(c, append([]redislimit.Option{redislimit.WithPrefix("t:" + t.Name()),
		redislimit.WithPollInterval(testPoll)}, longLease...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	l := h.Groups(1)
	n := attach(t, l)
	// Redis learns the scripts: the request cut is run, not refused with
	// NOSCRIPT, and the give-back is not sent again after the next refill.
	acquire(t, l, n, "warm", 1, 10*time.Second).Release()
	if err := redislimit.LoadReleaseScript(bg, newClient(t, addr)); err != nil {
		t.Fatal(err)
	}

	rc.armed.Store(true)
	p := acquire(t, l, n, "victim", 1, 20*time.Second)
	defer p.Release()
	select {
	case <-rc.fired:
	default:
		t.Fatal("no reply was cut")
	}
	if s := h.Stats(); s.RefillsDenied != 0 {
		t.Errorf("RefillsDenied = %d; want 0: nothing else holds the key", s.RefillsDenied)
	}
	leases := "t:" + t.Name() + ":{group:victim}:l"
	eventually(t, "the lease of the cut reply given back", 10*time.Second, func() bool {
		m, err := newClient(t, addr).ZCard(bg, leases).Result()
		return err == nil && m == 1
	})
}
