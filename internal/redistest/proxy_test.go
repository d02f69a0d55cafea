package redistest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// proxyClient returns a go-redis client that goes through p, with default
// timeouts, or fast-failing ones (see fastFail) if fast is set.
func proxyClient(t *testing.T, s *Server, p *Proxy, fast bool) *redis.Client {
	t.Helper()
	opt := s.Options()
	if fast {
		opt = fastFail(s)
	}
	opt.Addr = p.Addr()
	return s.ClientWith(t, opt)
}

func TestProxyForwards(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := NewProxy(t, s.Addr())
	c := proxyClient(t, s, p, false)
	ctx := ctxT(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through proxy: %v", err)
	}
	if got, err := s.Client(t).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET direct = %q, %v; want v", got, err)
	}
}

func TestProxyLatency(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := NewProxy(t, s.Addr())
	c := proxyClient(t, s, p, false) // 3 s timeouts: latency must not trip them
	ctx := ctxT(t)
	if err := c.Ping(ctx).Err(); err != nil { // dial outside the measurement
		t.Fatalf("PING: %v", err)
	}
	const latency = 150 * time.Millisecond
	p.SetLatency(latency)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with latency: %v", err)
	}
	// A lower bound only: a busy machine can add time, never remove it.
	if took := time.Since(start); took < 2*latency {
		t.Fatalf("round trip took %v, want at least %v (latency each way)", took, 2*latency)
	}
	p.SetLatency(0)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after removing latency: %v", err)
	}
}

func TestProxyBlockStalls(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := NewProxy(t, s.Addr())
	patient, fast := proxyClient(t, s, p, false), proxyClient(t, s, p, true)
	ctx := ctxT(t)
	if err := patient.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before block: %v", err)
	}
	p.Block()
	p.Block() // idempotent
	err := fast.Ping(ctx).Err()
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING while blocked = %v, want a timeout", err)
	}
	p.Unblock()
	p.Unblock() // idempotent
	if err := patient.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after unblock: %v", err)
	}
}

func TestProxyBlockHoldsDataUntilUnblock(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := NewProxy(t, s.Addr())
	conn := dialRaw(t, p.Addr())
	r := bufio.NewReader(conn)

	p.Block()
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatalf("deadline: %v", err)
	}
	if line, err := r.ReadString('\n'); err == nil {
		t.Fatalf("got %q while blocked", line)
	}
	p.Unblock()
	if err := conn.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatalf("deadline: %v", err)
	}
	line, err := r.ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		t.Fatalf("after unblock read %q, %v; want +PONG (held, not lost)", line, err)
	}
}

func TestProxyCloseAllDrops(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := NewProxy(t, s.Addr())
	conn := dialRaw(t, p.Addr())
	r := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("read %q, %v; want +PONG", line, err)
	}

	// An in-flight blocking command fails when its connection is dropped.
	// No retries, or go-redis would re-issue BLPOP on a new connection.
	opt := s.Options()
	opt.Addr, opt.MaxRetries = p.Addr(), -1
	c := s.ClientWith(t, opt)
	blpop := make(chan error, 1)
	ctx := ctxT(t)
	go func() { blpop <- c.BLPop(ctx, 0, "never").Err() }()
	waitBlocked(t, s)

	p.CloseAll()

	if err := conn.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatalf("deadline: %v", err)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatalf("raw connection still open after CloseAll")
	}
	select {
	case err := <-blpop:
		if err == nil {
			t.Fatalf("BLPOP survived CloseAll")
		}
	case <-time.After(testTimeout):
		t.Fatalf("BLPOP still blocked after CloseAll")
	}
	// The proxy keeps serving new connections.
	if err := proxyClient(t, s, p, false).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after CloseAll: %v", err)
	}
}

func TestProxyClose(t *testing.T) {
	t.Parallel()
	s := Start(t)
	p := NewProxy(t, s.Addr())
	conn := dialRaw(t, p.Addr())
	p.Block()
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	p.Close() // must not hang on the held data
	p.Close() // idempotent
	if err := conn.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatalf("deadline: %v", err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("connection open after Close")
	}
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("proxy still accepts after Close")
	}
}

func TestProxyUnreachableTarget(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	conn := dialRaw(t, p.Addr())
	if err := conn.SetReadDeadline(time.Now().Add(testTimeout)); err != nil {
		t.Fatalf("deadline: %v", err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("connection to a dead target stayed open")
	}
}

// dialRaw opens a plain TCP connection closed on cleanup.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// waitBlocked waits until the server reports a client blocked in BLPOP.
func waitBlocked(t *testing.T, s *Server) {
	t.Helper()
	ctx := ctxT(t)
	c := s.Client(t)
	for {
		info, err := c.Info(ctx, "clients").Result()
		if err != nil {
			t.Fatalf("INFO: %v", err)
		}
		if strings.Contains(info, "blocked_clients:1\r\n") {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no client blocked; INFO:\n%s", info)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
