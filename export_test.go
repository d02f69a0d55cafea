package throttle

// The test helpers of helpers_test.go, for the tests of package
// throttle_test, which see only exported names. They exist in test builds
// only.
type RTFunc = rtFunc

var (
	OKBase     = okBase
	NewRecBody = newRecBody
	NewReq     = newReq
	MustNew    = mustNew
	RoundTrip  = roundTrip
	FillBucket = fillBucket
)
