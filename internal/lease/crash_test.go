//go:build linux

package lease

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
)

// TestCrashedHolder: a child process (this test binary, re-executed; see
// child_test.go) holds every lease of a cap and is killed with SIGKILL.
// Its slots reach the parent's waiters within the TTL of the kill, the
// parent's other lease carries on, and a late release of the child's
// tokens frees nothing.
func TestCrashedHolder(t *testing.T) {
	srv := redistest.Start(t)
	ns := "crash-" + strconv.FormatInt(nsSeq.Add(1), 10)
	const ttl = 2 * time.Second
	const limit = 3

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"LEASE_TEST_CHILD_REDIS="+srv.Addr(),
		"LEASE_TEST_CHILD_N="+strconv.Itoa(limit),
		"LEASE_TEST_CHILD_LIMIT="+strconv.Itoa(limit),
		"LEASE_TEST_CHILD_TTL="+ttl.String(),
		"LEASE_TEST_CHILD_NS="+ns,
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // already killed by the test, unless it failed early
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	fields := strings.Fields(line)
	if len(fields) != 1+limit || fields[0] != "HELD" {
		t.Fatalf("child said %q", line)
	}
	var childTokens []int64
	for _, f := range fields[1:] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		childTokens = append(childTokens, n)
	}

	rdb := srv.Client(t)
	s := NewRedis(rdb, WithNamespace(ns), WithTTL(ttl))
	defer func() { _ = s.Close() }()
	c := Cap{Key: "crash", Rule: "crash", Limit: limit}
	other, err := s.Acquire(context.Background(), []Cap{{Key: "other", Rule: "other", Limit: 1}}, Normal, 0)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		l   *Lease
		at  time.Time
		err error
	}
	results := make(chan got, limit)
	for range limit {
		go func() {
			l, err := s.Acquire(context.Background(), []Cap{c}, Normal, 4*ttl)
			results <- got{l, time.Now(), err}
		}()
	}
	keys := s.keys(c.Key)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.ZCard(context.Background(), keys[1]).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tickets queued, want %d", n, limit)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(ttl / 2) // the child renews meanwhile: its leases outlive their first TTL
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var leases []*Lease
	var worst time.Duration
	for range limit {
		r := <-results
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		leases = append(leases, r.l)
		worst = max(worst, r.at.Sub(killed))
	}
	t.Logf("the crashed child's %d slots reached the waiters %v after SIGKILL (TTL %v)", limit, worst, ttl)
	if worst > ttl+200*time.Millisecond {
		t.Fatalf("slots returned %v after the kill, want within the TTL %v", worst, ttl)
	}
	select {
	case <-other.Lost():
		t.Fatal("the parent's other lease was lost")
	default:
	}
	// The child's late release frees nothing: the slots are the parent's.
	removed, err := s.releaseCall(context.Background(), []Cap{c}, childTokens[:1], "")
	if err != nil {
		t.Fatal(err)
	}
	if held, _ := rdb.ZCard(context.Background(), keys[0]).Result(); removed != 0 || held != limit {
		t.Fatalf("late release removed %d, %d holders left; want 0 and %d", removed, held, limit)
	}
	for i, l := range leases {
		if tok := l.Tokens()[0]; tok <= childTokens[limit-1] {
			t.Fatalf("lease %d has token %d, not above the child's %v", i, tok, childTokens)
		}
		l.Release()
	}
	other.Release()
}
