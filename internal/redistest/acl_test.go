package redistest

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// fleetACL is the least privilege a throttle worker needs: run its scripts on
// throttle:* keys, read the server clock, ping. "&*" allows all Pub/Sub
// channels (Redis 7 defaults new users to none). Redis 7 checks every
// redis.call inside a script against the caller's ACL too, so the commands
// the scripts call (here GET, SET, PEXPIRE) must be granted as well; they are
// still confined to ~throttle:* keys.
const fleetACL = "user fleet on >pw ~throttle:* &* -@all " +
	"+evalsha +eval +script|load +time +ping +get +set +pexpire"

// aclScript touches exactly the key it declares, like throttle's scripts.
var aclScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[1])
`)

func TestACL(t *testing.T) {
	t.Parallel()
	s := Start(t, WithACL(fleetACL))
	ctx := ctxT(t)
	fleet := s.ClientAs(t, "fleet", "pw")

	// Script.Run tries EVALSHA, gets NOSCRIPT, falls back to EVAL.
	got, err := aclScript.Run(ctx, fleet, []string{"throttle:{a}:k"}, "x").Text()
	if err != nil {
		t.Fatalf("script on throttle:* key: %v", err)
	}
	if got != "x" {
		t.Fatalf("script returned %q, want x", got)
	}
	if err := fleet.ScriptLoad(ctx, "return 1").Err(); err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	// Pure EVALSHA now that the script is cached.
	if err := fleet.EvalSha(ctx, aclScript.Hash(), []string{"throttle:{a}:k"}, "y").Err(); err != nil {
		t.Fatalf("EVALSHA on throttle:* key: %v", err)
	}
	if err := fleet.Time(ctx).Err(); err != nil {
		t.Fatalf("TIME: %v", err)
	}

	tests := []struct {
		name string
		run  func() error
	}{
		{"EVALSHA on another key", func() error {
			return fleet.EvalSha(ctx, aclScript.Hash(), []string{"other:k"}, "x").Err()
		}},
		{"EVAL on another key", func() error {
			return fleet.Eval(ctx, "return 1", []string{"other:k"}).Err()
		}},
		{"SET outside a script on another key", func() error {
			return fleet.Set(ctx, "other:k", "x", 0).Err()
		}},
		{"DEL outside the command set", func() error {
			return fleet.Del(ctx, "throttle:{a}:k").Err()
		}},
		{"SCRIPT FLUSH outside the subcommand set", func() error {
			return fleet.ScriptFlush(ctx).Err()
		}},
		{"FLUSHALL", func() error { return fleet.FlushAll(ctx).Err() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
				t.Fatalf("err = %v, want a NOPERM error", err)
			}
		})
	}

	// The default user is untouched, and a wrong password is refused.
	if err := s.Client(t).Get(ctx, "other:k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("default user GET = %v, want redis.Nil", err)
	}
	opt := fastFail(s)
	opt.Username, opt.Password = "fleet", "wrong"
	if err := s.ClientWith(t, opt).Ping(ctx).Err(); err == nil {
		t.Fatalf("PING with a wrong password succeeded")
	}
}

func TestACLDefaultUserOff(t *testing.T) {
	t.Parallel()
	// Start must still see the server as ready when anonymous PING is refused.
	s := Start(t, WithACL("user default off", "user admin on >secret ~* &* +@all"))
	ctx := ctxT(t)
	if err := s.ClientWith(t, fastFail(s)).Ping(ctx).Err(); err == nil {
		t.Fatalf("anonymous PING succeeded with the default user off")
	}
	if err := s.ClientAs(t, "admin", "secret").Ping(ctx).Err(); err != nil {
		t.Fatalf("PING as admin: %v", err)
	}
}
