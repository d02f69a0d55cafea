package redistest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

const (
	// proxyDialTimeout bounds the connection to the proxied address.
	proxyDialTimeout = 5 * time.Second
	// proxyBuffer is the read size per chunk and proxyQueue the number of
	// chunks held per direction; beyond that the proxy stops reading, so a
	// blocked proxy pushes back on the sender like a stalled network.
	proxyBuffer = 32 << 10
	proxyQueue  = 64
)

// Proxy is a TCP proxy on a free loopback port in front of one address, for
// fault tests: it can delay traffic (SetLatency), hold it (Block, Unblock) and
// drop every connection (CloseAll). Create it with NewProxy; the zero value is
// not usable. All methods are safe for concurrent use. Close, which t.Cleanup
// also calls, stops every goroutine the Proxy started, so go.uber.org/goleak
// stays quiet.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close; aborts pending dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy started

	mu      sync.Mutex
	latency time.Duration
	blocked bool
	unblock chan struct{} // closed by Unblock to release held data
	links   map[*link]struct{}
	closed  bool
}

// NewProxy listens on a free 127.0.0.1 port and forwards every accepted
// connection to target (typically Server.Addr()). It fails the test if it
// cannot listen. The proxy starts with no latency and unblocked, and is closed
// by t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		unblock: make(chan struct{}),
		links:   map[*link]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the "127.0.0.1:port" address clients should use instead of the
// target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk of data by d in each direction, measured from
// when the proxy read it, so a request/response round trip takes at least 2·d
// longer. d ≤ 0 removes the delay. It applies to data already held too.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = max(d, 0)
	p.mu.Unlock()
}

// Block holds all data, in both directions and on new connections too, until
// Unblock: connections stay open but nothing arrives, as in a network stall.
// Calling Block while blocked is a no-op.
func (p *Proxy) Block() {
	p.mu.Lock()
	if !p.blocked {
		p.blocked = true
		p.unblock = make(chan struct{})
	}
	p.mu.Unlock()
}

// Unblock releases the data held since Block, in order, and lets new data
// through. Calling Unblock while not blocked is a no-op.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	if p.blocked {
		p.blocked = false
		close(p.unblock)
	}
	p.mu.Unlock()
}

// CloseAll drops every open connection (both sides are closed; held data is
// discarded). The proxy keeps accepting new connections.
func (p *Proxy) CloseAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Close stops listening, drops every connection and waits for all of the
// proxy's goroutines to exit. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	// An error only means the listener is already closed.
	_ = p.ln.Close()
	p.CloseAll()
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || p.ctx.Err() != nil {
				return
			}
			// Transient (e.g. out of descriptors): back off, don't spin.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.wg.Add(1)
		go p.serve(conn)
	}
}

// serve connects one accepted client to the target and starts the pumps.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	dialer := net.Dialer{Timeout: proxyDialTimeout}
	upstream, err := dialer.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// The client sees the connection close, like a refused backend.
		_ = client.Close()
		return
	}
	l := &link{client: client, upstream: upstream, dead: make(chan struct{}), pending: 2}
	l.onClose = func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.pipe(l, client, upstream)
	p.pipe(l, upstream, client)
}

// chunk is data read from one side, stamped for the latency.
type chunk struct {
	data   []byte
	readAt time.Time
}

// pipe forwards src to dst with one reader and one writer goroutine, the
// queue between them holding data for latency and Block.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	queue := make(chan chunk, proxyQueue)
	p.wg.Add(2)
	go func() { // reader
		defer p.wg.Done()
		defer close(queue)
		for {
			buf := make([]byte, proxyBuffer)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{data: buf[:n], readAt: time.Now()}:
				case <-l.dead:
					return
				}
			}
			if err != nil {
				return // EOF or closed: the writer drains and finishes
			}
		}
	}()
	go func() { // writer
		defer p.wg.Done()
		for c := range queue {
			if !p.hold(c.readAt, l.dead) {
				return
			}
			if _, err := dst.Write(c.data); err != nil {
				l.close()
				return
			}
		}
		// src said EOF: pass the half-close on, and tear the link down once
		// both directions are done.
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite() // fails only if dst is already closed
		}
		l.directionDone()
	}()
}

// hold waits until data read at readAt may be sent: the latency has passed
// and the proxy is not blocked. It returns false if the link died meanwhile.
// It never sleeps holding p.mu.
func (p *Proxy) hold(readAt time.Time, dead <-chan struct{}) bool {
	for {
		p.mu.Lock()
		latency, blocked, unblock := p.latency, p.blocked, p.unblock
		p.mu.Unlock()
		if blocked {
			select {
			case <-unblock:
				continue
			case <-dead:
				return false
			}
		}
		wait := time.Until(readAt.Add(latency))
		if wait <= 0 {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
			// Loop: Block may have been called while we waited.
		case <-dead:
			timer.Stop()
			return false
		}
	}
}

// link is one proxied connection pair.
type link struct {
	client, upstream net.Conn
	dead             chan struct{} // closed by close
	once             sync.Once
	onClose          func() // unregisters from the proxy; set before publishing

	mu      sync.Mutex
	pending int // directions not yet finished
}

// close tears the pair down once: both sockets close, blocked pumps wake.
func (l *link) close() {
	l.once.Do(func() {
		close(l.dead)
		// Errors only mean a side was already closed.
		_ = l.client.Close()
		_ = l.upstream.Close()
		l.onClose()
	})
}

// directionDone records that one direction reached EOF and closes the link
// after the second.
func (l *link) directionDone() {
	l.mu.Lock()
	l.pending--
	last := l.pending == 0
	l.mu.Unlock()
	if last {
		l.close()
	}
}
