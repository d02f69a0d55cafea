// Package redistest starts private redis-server processes, Redis Clusters and
// fault-injecting TCP proxies for the tests of other packages.
//
// Everything here is built for _test.go files and takes a testing.TB: each
// helper registers its own t.Cleanup, so a test never stops what it started.
// The system Redis on 127.0.0.1:6379 is never used or touched; every server is
// a fresh redis-server child process on a free loopback port, with an empty
// keyspace, no persistence (--save "" --appendonly no) and its own temporary
// --dir.
//
// # Single node
//
// Start launches one server and waits until it answers PING (up to 10 s;
// on timeout the test fails with the tail of the server's log). The returned
// Server can be killed (SIGKILL), paused (SIGSTOP), resumed (SIGCONT), stopped
// gracefully and restarted on the same port with an empty memory and script
// cache, which lets tests exercise real outages. Options add command-line
// configuration (WithArgs), TLS with a throwaway CA and client certificate
// (WithTLS, Server.TLSConfig) and ACL users (WithACL, Server.ClientAs).
//
// # Cluster
//
// StartCluster launches n cluster-enabled masters, joins them with
// "redis-cli --cluster create ... --cluster-replicas 0" and waits until every
// node reports cluster_state:ok with all 16384 slots assigned. Nodes returns
// the underlying Servers so tests can kill or pause one master, and
// MasterForKey tells which node owns a key.
//
// # Proxy
//
// NewProxy puts a small TCP proxy in front of any address. It can add latency,
// hold traffic (Block/Unblock) to simulate a stall, and drop every connection
// (CloseAll). It starts no goroutine that outlives Close, so tests using
// go.uber.org/goleak stay clean.
//
// # Free ports and parallel tests
//
// Ports are found by binding 127.0.0.1:0 and closing the listener. Another
// process may take the port before redis-server binds it, so a start that fails
// with "Address already in use" is retried on a new port. Servers share
// nothing, so parallel tests may start as many as they need.
//
// # Missing binaries
//
// If redis-server (or redis-cli, for clusters) is not on PATH the test fails,
// never skips, with the command that installs it:
// "apt-get update && apt-get install -y redis-server" (or "brew install redis").
//
// # Process lifetime
//
// Children never outlive the test binary: on Linux they get
// Pdeathsig=SIGKILL, and every Server registers a cleanup that resumes a
// paused process, kills it and reaps it with Wait so no zombie is left.
package redistest
