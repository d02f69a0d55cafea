package providers

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// TwilioConfig tunes [TwilioPreset]. The zero value describes Twilio's own
// host with the preset's default request rate.
type TwilioConfig struct {
	// Host is the host the rules match. If empty, api.twilio.com.
	Host string

	// Concurrency is the most requests per account in flight at once. If
	// 0, [DefaultTwilioConcurrency] (see [TwilioPreset]).
	Concurrency int

	// Requests, if its Rate is set, adds a request rate per account to the
	// concurrency cap: Twilio publishes none, so by default there is none.
	Requests throttle.Limit

	// Sender returns the sender ("From") of a request that sends a
	// message, or "" when unknown. If nil, the sender given to the
	// request's context by [WithTwilioSender] is used: the sender is a form
	// field of the body, which a rule must not read.
	Sender func(*http.Request) string

	// Segments, if set, makes the per-sender rules count a message's
	// segments instead of messages, and raises their burst to 10 segments
	// so that a long message can ever be admitted (a message of more than
	// 10 segments then fails with a [*throttle.RuleError]). A sender may
	// then run up to 10 segments ahead of its rate, which Twilio queues.
	Segments func(*http.Request) int
}

// TwilioPreset returns the limits of Twilio's REST API and of its message
// senders:
//
//   - twilio-concurrency: requests in flight per account (the AccountSid
//     in the path), fleet-wide (see [throttle.Rule.Concurrency]). Twilio
//     limits concurrent requests per account, not their rate, and does not
//     publish the number (twilio.com/docs/api/errors/20429, read
//     2026-11); third parties say 100 (unconfirmed), the default
//     [DefaultTwilioConcurrency]. Set [TwilioConfig.Concurrency] to your
//     account's. A 429 with error 20429 lowers the fleet's cap and the
//     Twilio-Concurrent-Requests header keeps it in line with Twilio's
//     count (the dialect [Twilio]).
//   - twilio-long-code: 1 message/s per US long code sender (errors/21611,
//     30001; MMS too, changelog 2019-08-26).
//   - twilio-toll-free: 3 messages/s per US toll-free sender, the default;
//     high-throughput toll-free numbers get 25–150 (support article
//     4411046744987): edit the rule.
//   - twilio-short-code: 100 messages/s per short code ("100+").
//
// The per-sender rules match POST .../Messages.json and partition by the
// sender, which the caller names (see [TwilioConfig.Sender] and
// [WithTwilioSender]); a message whose sender is unknown, an alphanumeric
// sender ID, a WhatsApp or Messenger sender, or a Messaging Service without
// a From meets only twilio-concurrency. A sender of 3 to 8 digits without '+'
// is a short code; +1 followed by 800, 833, 844, 855, 866, 877 or 888 is
// toll-free; any other number starting with '+' is a long code. Above a
// sender's rate Twilio queues messages (up to 10 h of sending) rather than
// failing them; pacing at the rate keeps that queue empty.
//
// Twilio's 429 (error 20429) names no wait: the Transport pauses and backs
// off, and retries (a rejected request was never processed).
func TwilioPreset(c TwilioConfig) Preset {
	host := c.Host
	if host == "" {
		host = "api.twilio.com"
	}
	concurrency := c.Concurrency
	if concurrency <= 0 {
		concurrency = DefaultTwilioConcurrency
	}
	requests := c.Requests
	if requests.Rate == 0 {
		requests = throttle.Limit{}
	}
	sender := c.Sender
	if sender == nil {
		sender = twilioSenderFromContext
	}
	messages := throttle.Match{Host: host, Methods: []string{http.MethodPost}, Path: "/2010-04-01/Accounts/*/Messages.json"}
	perSender := func(name string, kind twilioSenderKind, rate int) throttle.Rule {
		m := messages
		m.Func = func(r *http.Request) bool { return classifyTwilioSender(sender(r)) == kind }
		l := throttle.Limit{Rate: rate, Period: time.Second, Burst: burstOf(rate)}
		if c.Segments != nil {
			l.Burst = max(l.Burst, maxTwilioSegments)
		}
		return throttle.Rule{Name: ruleName("twilio", name), Limit: l, Match: m, Key: sender, Cost: c.Segments}
	}
	return Preset{
		Name: twilioName,
		Rules: []throttle.Rule{
			{Name: "twilio-concurrency", Limit: requests, Concurrency: concurrency, Match: throttle.Match{Host: host}, Key: twilioAccount},
			perSender("long-code", twilioLongCode, 1),
			perSender("toll-free", twilioTollFree, 3),
			perSender("short-code", twilioShortCode, 100),
		},
		Dialect: Twilio,
	}
}

// DefaultTwilioConcurrency is [TwilioPreset]'s cap on requests in flight
// per account: 100, the number third parties give (apis.io, read
// 2026-11); Twilio publishes none. Unconfirmed: set
// [TwilioConfig.Concurrency] to your account's.
const DefaultTwilioConcurrency = 100

// maxTwilioSegments is the burst of the per-sender rules when they count
// segments: a message body of Twilio's maximum of 1,600 characters is 10
// segments of 160 (unconfirmed by PROVIDERS research).
const maxTwilioSegments = 10

// twilioAccount returns the AccountSid of a Twilio REST path
// (/2010-04-01/Accounts/AC.../...), or "".
func twilioAccount(r *http.Request) string {
	_, rest, ok := strings.Cut(r.URL.Path, "/Accounts/")
	if !ok {
		return ""
	}
	sid, _, _ := strings.Cut(rest, "/")
	return strings.TrimSuffix(sid, ".json")
}

type twilioSenderKind int

const (
	twilioUnknown twilioSenderKind = iota
	twilioLongCode
	twilioTollFree
	twilioShortCode
)

// classifyTwilioSender tells a sender's kind from its form (see
// TwilioPreset).
func classifyTwilioSender(from string) twilioSenderKind {
	if n, ok := strings.CutPrefix(from, "+"); ok {
		if !allDigits(n) || len(n) < 4 {
			return twilioUnknown
		}
		if len(n) == 11 && n[0] == '1' {
			switch n[1:4] {
			case "800", "833", "844", "855", "866", "877", "888":
				return twilioTollFree
			}
		}
		return twilioLongCode
	}
	if allDigits(from) && len(from) >= 3 && len(from) <= 8 {
		return twilioShortCode
	}
	return twilioUnknown
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// twilioSenderKey is the context key of WithTwilioSender.
type twilioSenderKey struct{}

// WithTwilioSender returns a copy of ctx naming the sender ("From") of the
// message that a request made with it sends, for [TwilioPreset]'s
// per-sender rules:
//
//	req, err := http.NewRequestWithContext(providers.WithTwilioSender(ctx, from), "POST", url, body)
func WithTwilioSender(ctx context.Context, from string) context.Context {
	return context.WithValue(ctx, twilioSenderKey{}, from)
}

func twilioSenderFromContext(r *http.Request) string {
	s, _ := r.Context().Value(twilioSenderKey{}).(string)
	return s
}
