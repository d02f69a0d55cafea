package redistest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// pairScript updates two keys atomically, as throttle does for several rules
// sharing one {hash tag}.
var pairScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
return redis.call('MGET', KEYS[1], KEYS[2])
`)

func TestCluster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3)
	ctx := ctxT(t)

	if got := len(c.Nodes()); got != 3 {
		t.Fatalf("len(Nodes()) = %d, want 3", got)
	}
	if got := len(c.Addrs()); got != 3 {
		t.Fatalf("len(Addrs()) = %d, want 3", got)
	}

	t.Run("CLUSTER INFO ok on every node", func(t *testing.T) {
		for _, n := range c.Nodes() {
			info, err := n.Client(t).ClusterInfo(ctx).Result()
			if err != nil {
				t.Fatalf("%s: CLUSTER INFO: %v", n.Addr(), err)
			}
			if !strings.Contains(info, "cluster_state:ok") {
				t.Fatalf("%s: CLUSTER INFO:\n%s", n.Addr(), info)
			}
		}
	})

	cl := c.Client(t)

	t.Run("same hash tag, same node", func(t *testing.T) {
		keys := []string{"throttle:{api-1}:a", "throttle:{api-1}:b"}
		owner := c.MasterForKey(keys[0])
		if other := c.MasterForKey(keys[1]); other != owner {
			t.Fatalf("%s on %s but %s on %s", keys[0], owner.Addr(), keys[1], other.Addr())
		}
		for _, k := range keys {
			if err := cl.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatalf("SET %s through the cluster: %v", k, err)
			}
		}
		// Both keys are physically on the owner.
		n, err := owner.Client(t).Exists(ctx, keys...).Result()
		if err != nil {
			t.Fatalf("EXISTS on owner: %v", err)
		}
		if n != 2 {
			t.Fatalf("owner %s holds %d of the 2 keys", owner.Addr(), n)
		}
	})

	t.Run("keys spread over all masters", func(t *testing.T) {
		seen := map[*Server]bool{}
		for i := range 64 {
			seen[c.MasterForKey("k"+strings.Repeat("x", i))] = true
		}
		if len(seen) != 3 {
			t.Fatalf("64 keys landed on %d masters, want 3", len(seen))
		}
	})

	t.Run("Lua on two keys with one hash tag", func(t *testing.T) {
		keys := []string{"throttle:{lua}:a", "throttle:{lua}:b"}
		got, err := pairScript.Run(ctx, cl, keys, "7").StringSlice()
		if err != nil {
			t.Fatalf("script: %v", err)
		}
		if len(got) != 2 || got[0] != "7" || got[1] != "7" {
			t.Fatalf("script returned %v, want [7 7]", got)
		}
	})

	t.Run("Lua across hash tags is refused", func(t *testing.T) {
		err := pairScript.Run(ctx, cl, []string{"{a}x", "{b}y"}, "7").Err()
		if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
			t.Fatalf("cross-slot script err = %v, want CROSSSLOT", err)
		}
	})

	// Not a subtest: Kill and Restart report failures on the TB given to
	// StartCluster, which must be this goroutine's.
	key := "throttle:{kill}:k"
	victim := c.MasterForKey(key)
	opt := c.Options()
	opt.MaxRetries, opt.MaxRedirects = -1, 1
	opt.DialTimeout, opt.ReadTimeout = 300*time.Millisecond, 300*time.Millisecond
	fast := c.ClientWith(t, opt)
	if err := cl.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET before kill: %v", err)
	}
	victim.Kill()
	if err := fast.Set(ctx, key, "v", 0).Err(); err == nil {
		t.Fatalf("SET on a killed master succeeded")
	}
	// The restarted node rejoins with its slots (nodes.conf is kept) but no
	// data. Killing it may have failed the whole cluster; wait for ok.
	victim.Restart()
	c.WaitReady(t)
	if err := cl.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart = %v, want redis.Nil", err)
	}
}

func TestStartClusterNeedsThreeMasters(t *testing.T) {
	t.Parallel()
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		StartCluster(ft, 2)
	}()
	<-done
	if !strings.Contains(ft.msg, "at least 3 masters") {
		t.Fatalf("failure message = %q", ft.msg)
	}
}
