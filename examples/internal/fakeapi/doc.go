// Package fakeapi holds local stand-ins for third-party APIs that enforce
// their rate limits strictly, for the runnable examples: a Stripe-like and
// a Twilio-like server, and the sliding-window counter they share. They
// answer over-limit requests the way the real APIs do (status, headers and
// error body), and record every arrival so that an example can say what the
// server saw.
package fakeapi
