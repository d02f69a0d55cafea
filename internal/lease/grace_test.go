package lease

import (
	"context"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/redistest"
)

// TestReturnGraceIsTheFleets: a replica back from an outage 600 ms after
// the first keeps its share only for what is left of the first's grace,
// not for a grace of its own; a replica whose call fails keeps its own.
func TestReturnGraceIsTheFleets(t *testing.T) {
	srv := redistest.Start(t)
	const grace = 1500 * time.Millisecond
	back := func() *Fallback {
		r := NewRedis(srv.Client(t), WithNamespace("grace-"+t.Name()))
		t.Cleanup(func() { _ = r.Close() })
		f := NewFallback(r, func() int { return 2 }, WithReturnGrace(grace))
		f.mu.Lock()
		f.upAt = time.Now() // as useRedis does when a probe answers
		f.mu.Unlock()
		f.joinGrace(context.Background())
		return f
	}
	first := back()
	time.Sleep(600 * time.Millisecond)
	late := back()
	end := func(f *Fallback) time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.upAt.Add(f.grace)
	}
	if d := end(late).Sub(end(first)); d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("the late replica's grace ends %v after the first's, want together", d)
	}
	if left := time.Until(end(late)); left > grace-500*time.Millisecond {
		t.Fatalf("the late replica has %v of grace left, want what is left of the first's (about 900 ms)", left)
	}
}
