// Package header reads the rate-limit signals a server sends in its
// responses: Retry-After, X-RateLimit-*, the IETF RateLimit and
// RateLimit-Policy fields, and, through a [Dialect], whatever else one
// provider sends.
//
// [Parse] reads one response into a [Signal]: whether the server rejected
// the request for rate ([Signal.Limited]), the wait it named
// ([Signal.RetryAfter]), what it reported of each quota ([Signal.Quotas]),
// its retry hint, scope, bucket and reason, and which provider's dialect
// recognised it ([Signal.Dialect]). [Signal.Wait] is the best
// wait the signal names before the next request:
//
//	sig := header.Parse(resp.StatusCode, resp.Header, time.Now(), 0)
//	if d, ok := sig.Wait(); ok && sig.Limited {
//		time.Sleep(d)
//	}
//
// A throttle.Transport runs Parse on every response it gets; call it
// yourself to read a response the Transport did not send, or to test a
// dialect.
//
// # Fields
//
// Parse reads, by their canonical keys:
//
//   - retry-after-ms (OpenAI, Azure OpenAI: milliseconds), else Retry-After
//     (RFC 9110: delay-seconds, fractional seconds, or an HTTP-date).
//   - X-RateLimit-Limit, -Remaining, -Used, -Reset and -Reset-After (GitHub,
//     Discord and many others), else X/Twitter's x-rate-limit-*, into one
//     quota named "requests"; x-ratelimit-resource into the scope. The unit
//     of -Reset differs between servers and is told apart by magnitude
//     (see [ParseReset]).
//   - The IETF fields of draft-ietf-httpapi-ratelimit-headers in whichever
//     form the server sends. The -10 form (RFC 9651 Lists:
//     `RateLimit-Policy: "burst";q=100;w=60` and `RateLimit:
//     "burst";r=50;t=30`) gives one quota per policy name, with its limit
//     q, unit qu, window w, remaining r, reset t and partition key pk; an
//     item of the wrong type or missing its required parameter is skipped,
//     and a field that does not parse is ignored whole, as the draft
//     requires. The -07 Dictionary form (`RateLimit: limit=100,
//     remaining=50, reset=5`, `RateLimit-Policy: 100;w=10`) and the -06
//     fields (RateLimit-Limit, -Remaining, -Reset) give one quota named
//     "default".
//   - x-should-retry (OpenAI, Anthropic) into [Signal.ShouldRetry].
//
// Headers come from an untrusted server, so every value is bounded before
// it is parsed (256 bytes for numbers, dates and short text, 4 KiB for a
// structured field), malformed values are ignored rather than reported,
// every duration in a parsed Signal is capped (at [DefaultMaxRetryAfter]
// unless the caller says otherwise), and at most 64 quotas are kept.
//
// # Dialects
//
// A [Dialect] reads one provider's headers after the standard fields; the
// providers package has dialects for OpenAI, Anthropic, GitHub, Discord,
// Stripe, Shopify, Salesforce, HubSpot and Twilio. To write one, read the
// fields with [Value] and parse them with [ParseCount],
// [ParseDelaySeconds], [ParseRetryAfter], [ParseReset], [ParseShouldRetry]
// and [SecondsToDuration], record quotas with [Signal.SetQuota], and set
// [Signal.Dialect] to a constant name of yours when the response holds one
// of your provider's fields; Parse normalises the result after the last
// dialect.
//
// Everything in this package is a pure function or a plain value: safe for
// concurrent use, with no state of its own.
package header
