package redistest

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds the wait for a fresh process to answer PING. It is
	// generous because the test machine may be busy with parallel builds.
	startTimeout = 10 * time.Second
	// stopTimeout bounds a graceful SIGTERM shutdown before Stop kills.
	stopTimeout = 10 * time.Second
	// freshPortAttempts is how many different ports Start tries when another
	// process grabs the chosen port first.
	freshPortAttempts = 5
	// defaultClusterNodeTimeout keeps failure detection fast enough for tests
	// that kill a master, yet slow enough not to flap on a loaded machine.
	defaultClusterNodeTimeout = "2000"
)

// Server is one private redis-server process listening on 127.0.0.1. It is
// created by Start (or as part of StartCluster); the zero value is not usable.
//
// The port stays the same for the Server's whole life, across Kill, Stop and
// Restart, so clients built earlier reconnect to the restarted process. Its
// methods are safe for concurrent use, but those that can fail the test
// (Pause, Resume, Restart) call t.Fatalf on the testing.TB given to Start and
// must therefore run on that test's goroutine.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	cfg     config
	cluster bool
	tlsConf *tls.Config // nil unless WithTLS
	tls     tlsFiles

	// port and clusterPort are fixed after the first successful start.
	port        int
	clusterPort int

	mu   sync.Mutex
	proc *process // nil while not running
}

// Start starts a private redis-server on a free loopback port and waits until
// it answers PING. It fails the test (never skips) if redis-server is not
// installed, cannot start or does not answer within 10 seconds; the failure
// message carries the tail of the server's log.
//
// The server runs with --bind 127.0.0.1, --save "", --appendonly no,
// --daemonize no, --enable-debug-command local (so tests may use DEBUG SLEEP)
// and a fresh temporary --dir, plus whatever the options add. A t.Cleanup
// resumes it if paused, kills it, reaps it and removes its directory.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	return start(t, cfg, false)
}

// start is Start with the cluster flag that StartCluster needs.
func start(t testing.TB, cfg config, cluster bool) *Server {
	t.Helper()
	s := &Server{
		t:       t,
		bin:     lookBinary(t, "redis-server"),
		dir:     t.TempDir(),
		cfg:     cfg,
		cluster: cluster,
	}
	if cluster && cfg.tls {
		t.Fatalf("redistest: WithTLS is not supported for clusters")
	}
	if cfg.tls {
		files, conf, err := genTLS(s.dir)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.tls, s.tlsConf = files, conf
	}
	if cfg.acl != nil {
		data := []byte(strings.Join(cfg.acl, "\n") + "\n")
		if err := os.WriteFile(s.aclPath(), data, 0o600); err != nil {
			t.Fatalf("redistest: write aclfile: %v", err)
		}
	}
	// Registered before the first launch so a half-started process is
	// reaped even when the start itself fails the test.
	t.Cleanup(s.shutdown)
	s.startFresh()
	return s
}

// startFresh picks new ports until one start succeeds.
func (s *Server) startFresh() {
	s.t.Helper()
	var lastErr error
	for range freshPortAttempts {
		port, err := freePort()
		if err != nil {
			s.t.Fatalf("%v", err)
		}
		clusterPort := 0
		if s.cluster {
			if clusterPort, err = freePort(); err != nil {
				s.t.Fatalf("%v", err)
			}
		}
		p, err := s.launch(port, clusterPort)
		if err == nil {
			s.port, s.clusterPort = port, clusterPort
			s.setProc(p)
			return
		}
		lastErr = err
		if !isAddrInUse(err) {
			break
		}
	}
	s.t.Fatalf("%v", lastErr)
}

// Addr returns the "127.0.0.1:port" address clients connect to (the TLS port
// when WithTLS is used). It does not change across Restart.
func (s *Server) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// PID returns the process id of the running redis-server, or 0 while the
// server is not running (after Kill or Stop, before Restart).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// TLSConfig returns a fresh copy of the client TLS configuration (trusted CA
// and client certificate) for a server started WithTLS, or nil otherwise.
// Callers may modify the copy.
func (s *Server) TLSConfig() *tls.Config {
	if s.tlsConf == nil {
		return nil
	}
	return s.tlsConf.Clone()
}

// Options returns new go-redis options for this server: its address and, with
// WithTLS, its TLSConfig. Everything else is go-redis's default; adjust the
// result (timeouts, retries, credentials) and pass it to redis.NewClient, or
// to ClientWith to have the client closed on cleanup.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), TLSConfig: s.TLSConfig()}
}

// Client returns a go-redis client for this server, authenticated as the
// default user, closed by t.Cleanup. It is safe for concurrent use.
func (s *Server) Client(t testing.TB) *redis.Client {
	return s.ClientWith(t, s.Options())
}

// ClientAs returns a go-redis client that authenticates as an ACL user (see
// WithACL), closed by t.Cleanup.
func (s *Server) ClientAs(t testing.TB, username, password string) *redis.Client {
	opt := s.Options()
	opt.Username, opt.Password = username, password
	return s.ClientWith(t, opt)
}

// ClientWith returns redis.NewClient(opt), closed by t.Cleanup. Start from
// Options to keep the address and TLS settings.
func (s *Server) ClientWith(t testing.TB, opt *redis.Options) *redis.Client {
	c := redis.NewClient(opt)
	// Close errors only say the client was already closed by the test.
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL and waits until the process is gone, simulating a crash:
// clients see connection errors until Restart. Killing a stopped server is a
// no-op.
func (s *Server) Kill() {
	if p := s.takeProc(); p != nil {
		p.kill()
	}
}

// Stop shuts the server down gracefully (SIGTERM, SIGKILL after 10 s) and
// waits for it. Stopping a stopped server is a no-op.
func (s *Server) Stop() {
	if p := s.takeProc(); p != nil {
		p.stop()
	}
}

// Pause freezes the process with SIGSTOP. Its sockets stay open, so clients
// connect but get no reply: commands hang until their read timeout. Pause
// fails the test if the server is not running.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(sigPause, "pause")
}

// Resume continues a paused process with SIGCONT; it fails the test if the
// server is not running. Resuming a running server is harmless.
func (s *Server) Resume() {
	s.t.Helper()
	s.signal(sigResume, "resume")
}

// Restart kills the process if it is running and starts a new one on the same
// port with the same options, so the keyspace and the script cache are empty
// while clients keep their address. A cluster node keeps its nodes.conf and
// so rejoins the cluster with its old identity and slots, but no data. If the
// port is still busy (the old socket lingering) the start is retried for up
// to 10 seconds; after that the test fails.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	// Nothing should be persisted, but make "empty" independent of that.
	for _, name := range []string{"dump.rdb", "appendonlydir"} {
		if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
			s.t.Fatalf("redistest: clean %s: %v", name, err)
		}
	}
	deadline := time.Now().Add(startTimeout)
	for {
		p, err := s.launch(s.port, s.clusterPort)
		if err == nil {
			s.setProc(p)
			return
		}
		if !isAddrInUse(err) || time.Now().After(deadline) {
			s.t.Fatalf("redistest: restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signal sends sig to the running process or fails the test.
func (s *Server) signal(sig os.Signal, what string) {
	s.t.Helper()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		s.t.Fatalf("redistest: %s %s: server is not running", what, s.Addr())
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %s %s: %v", what, s.Addr(), err)
	}
}

// setProc records the running process.
func (s *Server) setProc(p *process) {
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// takeProc detaches the running process, if any, so exactly one caller
// terminates it.
func (s *Server) takeProc() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	s.proc = nil
	return p
}

// shutdown is the t.Cleanup hook: kill whatever still runs and reap it.
func (s *Server) shutdown() {
	s.Kill()
}

func (s *Server) aclPath() string { return filepath.Join(s.dir, "users.acl") }

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// args builds the redis-server command line for the given ports.
func (s *Server) args(port, clusterPort int) []string {
	args := []string{
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", "",
		"--enable-debug-command", "local",
	}
	if s.cfg.tls {
		args = append(args,
			"--port", "0",
			"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", s.tls.serverCert,
			"--tls-key-file", s.tls.serverKey,
			"--tls-ca-cert-file", s.tls.caCert,
		)
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	if s.cfg.acl != nil {
		args = append(args, "--aclfile", s.aclPath())
	}
	if s.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(clusterPort),
			"--cluster-node-timeout", defaultClusterNodeTimeout,
		)
	}
	return append(args, s.cfg.args...)
}

// String describes the server for failure messages.
func (s *Server) String() string {
	return fmt.Sprintf("redis-server %s (pid %d, dir %s)", s.Addr(), s.PID(), s.dir)
}
