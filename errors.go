package throttle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/throttlekit/throttle/internal/store"
)

// Sentinel errors. Errors returned by the Transport wrap one of them, so
// callers can test with [errors.Is] whatever the concrete error type; the
// typed errors below carry the details, for [errors.As]. They are values
// to compare with, never to reassign.
var (
	// ErrInvalidRule is wrapped by every [*RuleError].
	ErrInvalidRule = errors.New("throttle: invalid rule")

	// ErrInvalidOption is wrapped by every [*OptionError].
	ErrInvalidOption = errors.New("throttle: invalid option")

	// ErrBeyondDeadline reports that a request's slot lies beyond its
	// context's deadline. A [*WaitError] wrapping it also matches
	// [context.DeadlineExceeded].
	ErrBeyondDeadline = errors.New("throttle: slot lies beyond the request's deadline")

	// ErrBeyondMaxWait reports that a request's slot lies beyond the
	// transport's maximum wait (see [WithMaxWait]).
	ErrBeyondMaxWait = errors.New("throttle: slot lies beyond the maximum wait")

	// ErrQueueFull reports that a bucket already has the maximum number of
	// waiters (see [WithMaxQueue]).
	ErrQueueFull = errors.New("throttle: too many requests waiting")

	// ErrStoreUnavailable reports that the shared store could not be reached
	// and the transport is configured to fail closed.
	ErrStoreUnavailable = store.ErrUnavailable
)

// RuleError reports an invalid rule, or a request that a rule cannot admit
// (a cost above the burst). It names the rule and the offending field.
//
// The Transport returns a *RuleError with every field set, and never
// changes it afterwards, so it may be read from any goroutine; its methods
// work on the zero RuleError too.
type RuleError struct {
	Rule   string // the rule's Name, or "#i" (its index) when the name is empty
	Field  string // the field, e.g. "Limit.Rate" or "Cost"
	Reason string // what is wrong with it
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("throttle: rule %q: %s: %s", e.Rule, e.Field, e.Reason)
}

// Unwrap returns [ErrInvalidRule].
func (e *RuleError) Unwrap() error { return ErrInvalidRule }

// OptionError reports an option given an invalid value. It names the option.
//
// New returns an *OptionError with every field set, and never changes it
// afterwards, so it may be read from any goroutine; its methods work on the
// zero OptionError too.
type OptionError struct {
	Option string // the option, e.g. "WithHeadroom"
	Reason string // what is wrong with its value
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("throttle: %s: %s", e.Option, e.Reason)
}

// Unwrap returns [ErrInvalidOption].
func (e *OptionError) Unwrap() error { return ErrInvalidOption }

// WaitError reports a request rejected because its slot lies too far ahead.
// Nothing was booked for it: the slot stays free for other requests.
//
// The Transport returns a *WaitError with every field set, and never
// changes it afterwards, so it may be read from any goroutine. Its methods
// work on the zero WaitError too, which wraps no reason.
type WaitError struct {
	Rule   string        // the rule whose bucket needed the longest wait
	Wait   time.Duration // the wait the request would have needed
	Budget time.Duration // the longest wait that was allowed
	Err    error         // ErrBeyondDeadline or ErrBeyondMaxWait
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%v: rule %q needs a wait of %v, allowed %v", e.Err, e.Rule, e.Wait, e.Budget)
}

// Unwrap returns the reason, and [context.DeadlineExceeded] when the reason
// is [ErrBeyondDeadline], so that callers who only check for the context's
// error see the deadline they set.
func (e *WaitError) Unwrap() []error {
	switch e.Err {
	case nil:
		return nil
	case ErrBeyondDeadline:
		return []error{e.Err, context.DeadlineExceeded}
	}
	return []error{e.Err}
}

// QueueFullError reports a request rejected because its bucket already had
// the maximum number of waiters in this process (see [WithMaxQueue]).
// Nothing was booked for it.
//
// The Transport returns a *QueueFullError with every field set, and never
// changes it afterwards, so it may be read from any goroutine; its methods
// work on the zero QueueFullError too.
type QueueFullError struct {
	Rule    string // the rule whose bucket is full
	Waiting int    // waiters at the time
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("%v: rule %q has %d waiters", ErrQueueFull, e.Rule, e.Waiting)
}

// Unwrap returns [ErrQueueFull].
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }

// waitError is the error of a reservation that is not ok: the wait it
// needed exceeds budget, for reason (ErrBeyondDeadline or
// ErrBeyondMaxWait).
func waitError(r *store.Reservation, budget time.Duration, reason error) *WaitError {
	return &WaitError{Rule: r.Buckets[r.Limiter].Rule, Wait: r.Wait, Budget: budget, Err: reason}
}
