package lease_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttle/internal/lease"
)

// The crash test's child: the test binary started with envChild set to a
// Redis address takes envChildN leases of key "crash" (limit envChildLimit)
// with a TTL of envChildTTL, prints "HELD tok tok ..." and sleeps until it
// is killed.
const (
	envChild      = "LEASE_TEST_CHILD_REDIS"
	envChildN     = "LEASE_TEST_CHILD_N"
	envChildLimit = "LEASE_TEST_CHILD_LIMIT"
	envChildTTL   = "LEASE_TEST_CHILD_TTL"
	envChildNS    = "LEASE_TEST_CHILD_NS"
)

func runChildIfAsked() {
	addr, ok := os.LookupEnv(envChild)
	if !ok {
		return
	}
	if err := child(addr); err != nil {
		fmt.Fprintf(os.Stderr, "child: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func child(addr string) error {
	n, _ := strconv.Atoi(os.Getenv(envChildN))
	limit, _ := strconv.Atoi(os.Getenv(envChildLimit))
	ttl, err := time.ParseDuration(os.Getenv(envChildTTL))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	s := lease.NewRedis(rdb, lease.WithTTL(ttl), lease.WithNamespace(os.Getenv(envChildNS)))
	var toks []string
	for range n {
		l, err := s.Acquire(context.Background(), []lease.Cap{{Key: "crash", Rule: "crash", Limit: limit}}, lease.Normal, time.Minute)
		if err != nil {
			return err
		}
		toks = append(toks, strconv.FormatInt(l.Tokens()[0], 10))
	}
	fmt.Printf("HELD %s\n", strings.Join(toks, " "))
	select {} // held, renewed, until SIGKILL
}
