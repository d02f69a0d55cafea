package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// testTimeout bounds every Redis call in these tests; generous because the
// machine is shared.
const testTimeout = 10 * time.Second

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// fastFail returns options that give up quickly, so tests of outages do not
// wait through go-redis's retries and default 3 s timeouts. Use them only for
// calls expected to fail: on a loaded machine a healthy call can take longer.
func fastFail(s *Server) *redis.Options {
	opt := s.Options()
	opt.MaxRetries = -1
	opt.DialTimeout = 300 * time.Millisecond
	opt.ReadTimeout = 300 * time.Millisecond
	opt.WriteTimeout = 300 * time.Millisecond
	return opt
}

func TestStartSetGet(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx := ctxT(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	got, err := c.Get(ctx, "k").Result()
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	if got != "v" {
		t.Fatalf("GET = %q, want v", got)
	}
	if s.Addr() == "127.0.0.1:6379" {
		t.Fatalf("private server must not use the system port")
	}
	if s.PID() <= 0 {
		t.Fatalf("PID() = %d for a running server", s.PID())
	}
}

func TestParallelServersAreIndependent(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers share %s", a.Addr())
	}
	if err := a.Client(t).Set(ctx, "only-a", "1", 0).Err(); err != nil {
		t.Fatalf("SET on a: %v", err)
	}
	if err := b.Client(t).Get(ctx, "only-a").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET on b = %v, want redis.Nil", err)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArgs("--maxmemory-policy", "allkeys-lru"))
	got, err := s.Client(t).ConfigGet(ctxT(t), "maxmemory-policy").Result()
	if err != nil {
		t.Fatalf("CONFIG GET: %v", err)
	}
	if got["maxmemory-policy"] != "allkeys-lru" {
		t.Fatalf("maxmemory-policy = %q, want allkeys-lru", got["maxmemory-policy"])
	}
	// The package's own defaults hold too.
	got, err = s.Client(t).ConfigGet(ctxT(t), "save").Result()
	if err != nil {
		t.Fatalf("CONFIG GET save: %v", err)
	}
	if got["save"] != "" {
		t.Fatalf("save = %q, want empty (no persistence)", got["save"])
	}
}

func TestKillMakesPingFail(t *testing.T) {
	t.Parallel()
	s := Start(t)
	c := s.ClientWith(t, fastFail(s))
	ctx := ctxT(t)
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before kill: %v", err)
	}
	pid := s.PID()
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatalf("PING after Kill succeeded")
	}
	if s.PID() != 0 {
		t.Fatalf("PID() = %d after Kill, want 0", s.PID())
	}
	// Reaped, not a zombie: signal 0 to the old pid finds nothing.
	if processExists(pid) {
		t.Fatalf("old pid %d still exists after Kill", pid)
	}
	s.Kill() // idempotent
}

func TestStopIsGraceful(t *testing.T) {
	t.Parallel()
	s := Start(t)
	c := s.ClientWith(t, fastFail(s))
	s.Stop()
	if err := c.Ping(ctxT(t)).Err(); err == nil {
		t.Fatalf("PING after Stop succeeded")
	}
	s.Stop() // idempotent
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t)
	patient, fast := s.Client(t), s.ClientWith(t, fastFail(s))
	ctx := ctxT(t)
	if err := patient.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING before pause: %v", err)
	}
	s.Pause()
	err := fast.Ping(ctx).Err()
	var netErr net.Error
	if !errors.As(err, &netErr) || !netErr.Timeout() {
		t.Fatalf("PING while paused = %v, want a timeout", err)
	}
	s.Resume()
	if err := patient.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after resume: %v", err)
	}
}

func TestPausedServerIsKilledOnCleanup(t *testing.T) {
	t.Parallel()
	var pid int
	t.Run("pause and leave", func(t *testing.T) {
		s := Start(t)
		pid = s.PID()
		s.Pause()
	})
	if processExists(pid) {
		t.Fatalf("paused server pid %d survived its test's cleanup", pid)
	}
}

func TestRestartEmptiesKeyspaceAndScriptCache(t *testing.T) {
	t.Parallel()
	s := Start(t)
	ctx := ctxT(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	addr, pid := s.Addr(), s.PID()

	s.Restart()

	if s.Addr() != addr {
		t.Fatalf("Addr changed across Restart: %s -> %s", addr, s.Addr())
	}
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("PID after Restart = %d, old %d", s.PID(), pid)
	}
	// The same client reconnects: its old connection died with the process
	// (go-redis retries once on the broken pooled connection).
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatalf("DBSIZE after restart: %v", err)
	}
	if n != 0 {
		t.Fatalf("DBSIZE after restart = %d, want 0", n)
	}
	exists, err := c.ScriptExists(ctx, sha).Result()
	if err != nil {
		t.Fatalf("SCRIPT EXISTS: %v", err)
	}
	if len(exists) != 1 || exists[0] {
		t.Fatalf("SCRIPT EXISTS after restart = %v, want [false]", exists)
	}
}

func TestRestartAfterKill(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Kill()
	s.Restart()
	if err := s.Client(t).Ping(ctxT(t)).Err(); err != nil {
		t.Fatalf("PING after Kill+Restart: %v", err)
	}
}

func TestLookBinaryMissingFailsWithInstallHint(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // not parallel: Setenv
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		// Fatalf ends this goroutine with runtime.Goexit, like a real test.
		defer close(done)
		lookBinary(ft, "redis-server")
	}()
	<-done
	for _, want := range []string{
		"redis-server not found",
		"apt-get update && apt-get install -y redis-server",
		"brew install redis",
	} {
		if !strings.Contains(ft.msg, want) {
			t.Errorf("failure message %q lacks %q", ft.msg, want)
		}
	}
}

// fatalRecorder captures a Fatalf message instead of failing the real test.
type fatalRecorder struct {
	testing.TB
	msg string
}

// Fatalf records the message and stops the calling goroutine, as
// testing.T.Fatalf does.
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
