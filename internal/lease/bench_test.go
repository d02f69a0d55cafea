package lease_test

import (
	"context"
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
