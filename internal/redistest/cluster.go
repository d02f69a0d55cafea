package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterCreateTimeout bounds redis-cli --cluster create, which itself
	// waits for the nodes to agree on the configuration.
	clusterCreateTimeout = 60 * time.Second
	// clusterReadyTimeout bounds the wait for cluster_state:ok everywhere.
	clusterReadyTimeout = 30 * time.Second
	// clusterSlots is the fixed number of hash slots in Redis Cluster.
	clusterSlots = 16384
)

// Cluster is a private Redis Cluster of masters without replicas, created by
// StartCluster; the zero value is not usable. Its nodes are ordinary Servers,
// so tests can Kill, Pause or Restart one master. Methods that can fail the
// test call t.Fatalf on the testing.TB given to StartCluster and must run on
// that test's goroutine.
type Cluster struct {
	t     testing.TB
	nodes []*Server
}

// StartCluster starts n cluster-enabled redis-server masters (n ≥ 3, as
// redis-cli requires; 3 is the usual choice) on free ports, joins them with
// "redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes" and
// waits until every node reports cluster_state:ok, all 16384 slots assigned
// and all n nodes known. It fails the test, with install instructions, if
// redis-server or redis-cli is missing.
//
// Every node runs with --cluster-enabled yes, a nodes.conf in its own
// temporary directory, an explicit free --cluster-port (the default port+10000
// can exceed 65535 for ephemeral ports) and --cluster-node-timeout 2000 (ms).
// opts apply to every node; WithArgs("--cluster-node-timeout", "500") makes
// failure detection faster. WithTLS is not supported.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, got %d", n)
	}
	cli := lookBinary(t, "redis-cli")
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	c := &Cluster{t: t}
	for range n {
		c.nodes = append(c.nodes, start(t, cfg, true))
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.CommandContext(ctx, cli, args...)
	setDeathSignal(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: %s %s: %v\n%s", cli, strings.Join(args, " "), err, out)
	}
	if err := c.waitReady(); err != nil {
		t.Fatalf("%v", err)
	}
	return c
}

// WaitReady waits up to 30 seconds until every node reports
// cluster_state:ok, all slots assigned and all nodes known, and fails t
// otherwise. StartCluster already does this; call it again after restarting a
// node, before relying on the cluster. With a node killed and not restarted
// the cluster never becomes ready again (there are no replicas to fail over to).
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	if err := c.waitReady(); err != nil {
		t.Fatalf("%v", err)
	}
}

// waitReady polls CLUSTER INFO on every node until the cluster is usable
// from any of them.
func (c *Cluster) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	clients := make([]*redis.Client, len(c.nodes))
	for i, s := range c.nodes {
		opt := s.Options()
		opt.MaxRetries = -1
		opt.ReadTimeout = time.Second // a paused node must not stall the poll
		clients[i] = redis.NewClient(opt)
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close() // best effort; nothing else uses these clients
		}
	}()
	var lastInfo string
	for {
		ready := true
		for i, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				lastInfo = fmt.Sprintf("%s: %v", c.nodes[i].Addr(), err)
				ready = false
				break
			}
			if !clusterInfoReady(info, len(c.nodes)) {
				lastInfo = c.nodes[i].Addr() + ":\n" + info
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster %v not ready within %v; last CLUSTER INFO %s",
				c.Addrs(), clusterReadyTimeout, lastInfo)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterInfoReady checks one node's CLUSTER INFO reply.
func clusterInfoReady(info string, nodes int) bool {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields["cluster_state"] == "ok" &&
		fields["cluster_slots_assigned"] == strconv.Itoa(clusterSlots) &&
		fields["cluster_known_nodes"] == strconv.Itoa(nodes)
}

// Addrs returns the "127.0.0.1:port" addresses of all nodes, in Nodes order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns the cluster's masters. The slice is a copy; the Servers are
// the live nodes, so Kill or Pause on one of them affects the cluster.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Options returns new go-redis cluster options seeded with every node's
// address; adjust them and pass them to ClientWith or redis.NewClusterClient.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs()}
}

// Client returns a go-redis cluster client for this cluster, closed by
// t.Cleanup. It is safe for concurrent use.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	return c.ClientWith(t, c.Options())
}

// ClientWith returns redis.NewClusterClient(opt), closed by t.Cleanup.
func (c *Cluster) ClientWith(t testing.TB, opt *redis.ClusterOptions) *redis.ClusterClient {
	cl := redis.NewClusterClient(opt)
	// Close errors only say the client was already closed by the test.
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// MasterForKey returns the node that serves key's hash slot, asking a running
// node for CLUSTER KEYSLOT and CLUSTER SHARDS. It fails the test if no node
// answers or no node owns the slot.
func (c *Cluster) MasterForKey(key string) *Server {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []string
	for _, s := range c.nodes {
		if s.PID() == 0 {
			continue
		}
		owner, err := c.ownerVia(ctx, s, key)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		return owner
	}
	c.t.Fatalf("redistest: no master found for key %q: %s", key, strings.Join(errs, "; "))
	return nil
}

// ownerVia asks node s which node serves key.
func (c *Cluster) ownerVia(ctx context.Context, s *Server, key string) (*Server, error) {
	opt := s.Options()
	opt.MaxRetries = -1
	opt.ReadTimeout = time.Second // a paused node must not stall the lookup
	cl := redis.NewClient(opt)
	defer func() { _ = cl.Close() }()
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER KEYSLOT: %w", s.Addr(), err)
	}
	shards, err := cl.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER SHARDS: %w", s.Addr(), err)
	}
	for _, shard := range shards {
		if !shardHasSlot(shard, slot) {
			continue
		}
		for _, node := range shard.Nodes {
			if node.Role != "master" {
				continue
			}
			for _, n := range c.nodes {
				if int64(n.port) == node.Port {
					return n, nil
				}
			}
			return nil, fmt.Errorf("%s: slot %d served by unknown node %s:%d", s.Addr(), slot, node.IP, node.Port)
		}
	}
	return nil, fmt.Errorf("%s: slot %d is not assigned", s.Addr(), slot)
}

// shardHasSlot reports whether one of shard's slot ranges contains slot.
func shardHasSlot(shard redis.ClusterShard, slot int64) bool {
	for _, r := range shard.Slots {
		if slot >= r.Start && slot <= r.End {
			return true
		}
	}
	return false
}
