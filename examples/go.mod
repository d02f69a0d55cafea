module github.com/throttlekit/throttle/examples

go 1.26.8

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stripe/stripe-go/v82 v82.5.1
	github.com/throttlekit/throttle v0.0.0-00010101000000-000000000000
	github.com/twilio/twilio-go v1.31.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/golang-jwt/jwt/v5 v5.2.2 // indirect
	github.com/golang/mock v1.6.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

// The root module, from this clone: the nested modules are developed and
// tested against the library beside them, never a published version.
replace github.com/throttlekit/throttle => ../
