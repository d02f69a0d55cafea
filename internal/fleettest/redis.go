package fleettest

import (
	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttle"
)

// redisOptions returns the options that put the transport's buckets in
// rdb, under cfg's namespace.
func redisOptions(cfg WorkerConfig, rdb redis.UniversalClient) []throttle.Option {
	opts := []throttle.Option{throttle.WithRedis(rdb)}
	if cfg.Namespace != "" {
		opts = append(opts, throttle.WithNamespace(cfg.Namespace))
	}
	return opts
}
