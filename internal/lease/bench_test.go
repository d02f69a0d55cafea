package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttle/internal/lease"
	"github.com/throttlekit/throttle/internal/redistest"
)

// BenchmarkAcquireRelease takes and gives back one lease of a cap far
// above the parallelism, so that nobody waits: the cost of the happy path.
// The Redis store's release goes out in the background; the run ends once
// every release has (Close waits for them).
func BenchmarkAcquireRelease(b *testing.B) {
	caps := []lease.Cap{{Key: "bench", Rule: "bench", Limit: 1 << 20}}
	b.Run("local", func(b *testing.B) {
		s := lease.NewLocal()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := s.Acquire(context.Background(), caps, lease.Normal, time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				l.Release()
			}
		})
	})
	b.Run("redis", func(b *testing.B) {
		rdb := redistest.Start(b).Client(b)
		s := lease.NewRedis(rdb, lease.WithNamespace("bench"))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := s.Acquire(context.Background(), caps, lease.Normal, time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				l.Release()
			}
		})
		_ = s.Close() // waits for the background releases
	})
	b.Run("redis-contended", func(b *testing.B) {
		// A cap of 4 under the benchmark's parallelism: requests wait for
		// each other's releases, woken by pub/sub.
		rdb := redistest.Start(b).Client(b)
		s := lease.NewRedis(rdb, lease.WithNamespace("bench"))
		small := []lease.Cap{{Key: "small", Rule: "bench", Limit: 4}}
		b.ReportAllocs()
		b.SetParallelism(4) // 4 × GOMAXPROCS requests for 4 leases
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := s.Acquire(context.Background(), small, lease.Normal, 10*time.Second)
				if err != nil {
					b.Error(err)
					return
				}
				l.Release()
			}
		})
		_ = s.Close()
	})
}

// BenchmarkHandOff measures a hand-off: a cap of 1, and requests that
// each hold their lease for no time, so that every op is a release
// followed by the next holder's grant. "one store" has its waiters in the
// releasing store (1 process), "two stores" half of them in another store
// on its own client (2 processes). ns/op is the time from one release to
// the next lease, the slot's idle time per request.
func BenchmarkHandOff(b *testing.B) {
	caps := []lease.Cap{{Key: "handoff", Rule: "bench", Limit: 1}}
	for _, stores := range []int{1, 2} {
		name := "one store"
		if stores == 2 {
			name = "two stores"
		}
		b.Run(name, func(b *testing.B) {
			srv := redistest.Start(b)
			var ss []*lease.Redis
			for range stores {
				ss = append(ss, lease.NewRedis(srv.Client(b), lease.WithNamespace("handoff")))
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				s := ss[int(next.Add(1))%stores]
				for pb.Next() {
					l, err := s.Acquire(context.Background(), caps, lease.Normal, 10*time.Second)
					if err != nil {
						b.Error(err)
						return
					}
					l.Release()
				}
			})
			for _, s := range ss {
				_ = s.Close()
			}
		})
	}
}
