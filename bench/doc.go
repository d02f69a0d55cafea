// Package bench is the side-by-side benchmark suite of BENCHMARKS.md: the
// Transport's local decision beside golang.org/x/time/rate and
// go.uber.org/ratelimit, its Redis path beside go-redis/redis_rate against a
// private redis-server, and what observing costs with otelthrottle and
// promthrottle. It holds no library code, only benchmarks (its _test.go
// files) and this doc.
//
// It is a module of its own, github.com/throttlekit/throttle/bench, so that
// the libraries it compares against never enter the go.mod, and so the
// go.sum, of a user of package throttle. It reaches the root through the
// replace directive of its go.mod, and the root's internal packages
// (internal/localstore, internal/redisstore, internal/redistest) by their
// import paths, which lie under the root's: the benchmarks of a store alone
// need the store, which users never see. Run it from this directory:
//
//	go test -run '^$' -bench . -benchmem .
//
// or the whole suite and its table with ../scripts/bench.
package bench
