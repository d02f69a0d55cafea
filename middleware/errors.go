package middleware

import "errors"

// ErrUnknownTier reports a [Limiter.Take] for a tier the Limiter was not
// given (see [WithTier]).
var ErrUnknownTier = errors.New("middleware: unknown tier")

// ErrNoRule reports a [Limiter.Take] whose tier has no rule that applies
// to every request (a zero Match) with a rate: nothing to book.
var ErrNoRule = errors.New("middleware: no rule to take from")
