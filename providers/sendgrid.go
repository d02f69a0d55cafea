package providers

import (
	"net/http"
	"strings"
	"time"

	"github.com/throttlekit/throttle"
)

// SendGridConfig tunes [SendGridPreset]. The zero value describes one
// SendGrid account calling api.sendgrid.com with the preset's numbers,
// most of them unconfirmed (see SendGridPreset).
type SendGridConfig struct {
	// Host is the host the rules match. If empty, api.sendgrid.com.
	Host string

	// PerEndpoint is the quota of each v3 endpoint but mail/send per
	// EndpointPeriod. If ≤ 0, 500 (unconfirmed: the figure of SendGrid's
	// example headers; SendGrid publishes no number).
	PerEndpoint int

	// EndpointPeriod is the refresh period of an endpoint's quota. If ≤ 0,
	// a minute (unconfirmed: SendGrid does not publish it; its
	// X-RateLimit-Reset tells when the current one ends).
	EndpointPeriod time.Duration

	// MailSend is the limit of v3 mail/send requests per second. If ≤ 0,
	// 10,000 (unconfirmed: a secondary source).
	MailSend int

	// V2PerMinute is the limit of v2 Web API requests (/api/…) per minute,
	// mail.send excepted. If ≤ 0, 600.
	V2PerMinute int

	// Key partitions every rule, for a fleet calling several SendGrid
	// accounts or subusers, each with its own quotas. If nil, all requests
	// share one account's buckets.
	Key func(*http.Request) string
}

// SendGridPreset returns SendGrid's limits
// (twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/rate-limits
// and the changelog of 2019-10-10, read 2026-11-30):
//
//   - sendgrid-endpoint: each v3 endpoint (the method and the path with
//     its IDs replaced, see [SendGridEndpoint]) but mail/send has its own
//     fixed quota per refresh period, which resets at the instant its
//     X-RateLimit-Reset gives. The preset counts 500 per minute
//     ([SendGridConfig.PerEndpoint], EndpointPeriod), unconfirmed: SendGrid
//     publishes neither number. The rule is a [throttle.FixedWindow],
//     SendGrid's own algorithm, so its windows align to the reset the
//     first answer reports.
//   - sendgrid-mail-send: 10,000 requests/s on /v3/mail/send
//     ([SendGridConfig.MailSend]), unconfirmed (a secondary source).
//   - sendgrid-v2: 600 requests/min on the v2 Web API (/api/…), mail.send
//     excepted ([SendGridConfig.V2PerMinute]).
//
// SendGrid sends X-RateLimit-Limit, -Remaining and -Reset (a Unix time in
// seconds) and answers 429 over the limit: the standard fields that
// [header.Parse] reads without a dialect, so the preset has none.
func SendGridPreset(c SendGridConfig) Preset {
	host := c.Host
	if host == "" {
		host = "api.sendgrid.com"
	}
	perEndpoint, period, mailSend, v2 := c.PerEndpoint, c.EndpointPeriod, c.MailSend, c.V2PerMinute
	if perEndpoint <= 0 {
		perEndpoint = 500
	}
	if period <= 0 {
		period = time.Minute
	}
	if mailSend <= 0 {
		mailSend = 10_000
	}
	if v2 <= 0 {
		v2 = 600
	}
	return Preset{
		Name: "sendgrid",
		Rules: []throttle.Rule{
			{
				Name:      ruleName("sendgrid", "endpoint"),
				Algorithm: throttle.FixedWindow,
				Limit:     throttle.Limit{Rate: perEndpoint, Period: period},
				Match: throttle.Match{Host: host, PathPrefix: "/v3/", Func: func(r *http.Request) bool {
					return !isSendGridMailSend(r.URL.Path)
				}},
				Key: withKey(c.Key, func(r *http.Request) string { return SendGridEndpoint(r.Method, r.URL.Path) }),
			},
			{
				Name:  ruleName("sendgrid", "mail-send"),
				Limit: throttle.Limit{Rate: mailSend, Period: time.Second, Burst: burstOf(mailSend)},
				Match: throttle.Match{Host: host, Func: func(r *http.Request) bool { return isSendGridMailSend(r.URL.Path) }},
				Key:   c.Key,
			},
			{
				Name:  ruleName("sendgrid", "v2"),
				Limit: throttle.Limit{Rate: v2, Period: time.Minute, Burst: burstOf(v2)},
				Match: throttle.Match{Host: host, PathPrefix: "/api/", Func: func(r *http.Request) bool {
					return !strings.HasPrefix(r.URL.Path, "/api/mail.send")
				}},
				Key: c.Key,
			},
		},
	}
}

// isSendGridMailSend reports whether path is v3 mail/send.
func isSendGridMailSend(path string) bool {
	return strings.TrimSuffix(path, "/") == "/v3/mail/send"
}

// SendGridEndpoint returns the endpoint of a SendGrid v3 request, the
// unit of its quotas: the method (GET when empty) and the path with every
// segment after the version that holds a digit replaced by "{id}"
// ("GET /v3/templates/{id}" for "/v3/templates/d-4ab5"), so that the
// requests for different objects share their endpoint's bucket. A resource
// name with a digit would be merged with its parent's IDs: the cautious
// side.
func SendGridEndpoint(method, path string) string {
	if method == "" {
		method = http.MethodGet
	}
	segs := strings.Split(strings.TrimSuffix(path, "/"), "/")
	for i, s := range segs {
		if i >= 2 && strings.ContainsAny(s, "0123456789") {
			segs[i] = "{id}"
		}
	}
	return method + " " + strings.Join(segs, "/")
}
