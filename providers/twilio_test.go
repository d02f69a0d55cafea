package providers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/providers"
)

func TestTwilioPreset(t *testing.T) {
	ctx := context.Background()
	twilioMsg := "https://api.twilio.com/2010-04-01/Accounts/AC123/Messages.json"
	sender := func(from string) context.Context { return providers.WithTwilioSender(ctx, from) }
	twilio := providers.TwilioPreset(providers.TwilioConfig{})
	s := time.Second
	cost := func(*http.Request) int { return 1 }
	t.Run("limits", func(t *testing.T) {
		checkLimits(t, []limitCase{
			{"twilio", twilio, map[string]throttle.Limit{
				"twilio-concurrency": {}, "twilio-long-code": lim(1, s, 1), "twilio-toll-free": lim(3, s, 1), "twilio-short-code": lim(100, s, 1),
			}},
			{"twilio segments and own rate", providers.TwilioPreset(providers.TwilioConfig{Requests: lim(5, s, 2), Segments: cost}), map[string]throttle.Limit{
				"twilio-concurrency": lim(5, s, 2), "twilio-long-code": lim(1, s, 10), "twilio-short-code": lim(100, s, 10),
			}},
		})
	})
	t.Run("concurrency", func(t *testing.T) {
		if r := twilio.Rule("twilio-concurrency"); r == nil || r.Concurrency != providers.DefaultTwilioConcurrency {
			t.Fatalf("twilio-concurrency: %+v, want a cap of %d", r, providers.DefaultTwilioConcurrency)
		}
		own := providers.TwilioPreset(providers.TwilioConfig{Concurrency: 10})
		if r := own.Rule("twilio-concurrency"); r.Concurrency != 10 || r.Limit != (throttle.Limit{}) {
			t.Errorf("own cap: %+v, want 10 and no rate", r)
		}
		if _, err := throttle.New(nil, twilio.Options()...); err != nil {
			t.Errorf("the preset's rules: %v", err)
		}
	})
	t.Run("matches", func(t *testing.T) {
		checkMatches(t, []matchCase{
			{"twilio long code", twilio, newReq(sender("+14155550100"), "POST", twilioMsg, "From=x"), []string{"twilio-concurrency", "twilio-long-code"}},
			{"twilio toll-free", twilio, newReq(sender("+18005550100"), "POST", twilioMsg, "From=x"), []string{"twilio-concurrency", "twilio-toll-free"}},
			{"twilio short code", twilio, newReq(sender("12345"), "POST", twilioMsg, "From=x"), []string{"twilio-concurrency", "twilio-short-code"}},
			{"twilio UK long code", twilio, newReq(sender("+447700900123"), "POST", twilioMsg, "From=x"), []string{"twilio-concurrency", "twilio-long-code"}},
			{"twilio whatsapp sender", twilio, newReq(sender("whatsapp:+14155550100"), "POST", twilioMsg, "From=x"), []string{"twilio-concurrency"}},
			{"twilio alphanumeric sender", twilio, newReq(sender("ACME"), "POST", twilioMsg, "From=x"), []string{"twilio-concurrency"}},
			{"twilio sender unknown", twilio, newReq(ctx, "POST", twilioMsg, "From=x"), []string{"twilio-concurrency"}},
			{"twilio list messages", twilio, newReq(sender("+14155550100"), "GET", twilioMsg, ""), []string{"twilio-concurrency"}},
			{"twilio calls", twilio, newReq(ctx, "GET", "https://api.twilio.com/2010-04-01/Accounts/AC123/Calls.json", ""), []string{"twilio-concurrency"}},
		})
	})
	t.Run("keys", func(t *testing.T) {
		msg := func(account, from string) *http.Request {
			return newReq(providers.WithTwilioSender(ctx, from), "POST", "https://api.twilio.com/2010-04-01/Accounts/"+account+"/Messages.json", "x")
		}
		checkKeys(t, []keyCase{
			{"twilio requests: per account", twilio, "twilio-concurrency", msg("AC1", "+14155550100"), msg("AC2", "+14155550100"), false},
			{"twilio requests: same account", twilio, "twilio-concurrency",
				msg("AC1", "+14155550100"), newReq(ctx, "GET", "https://api.twilio.com/2010-04-01/Accounts/AC1.json", ""), true},
			{"twilio long code: per sender", twilio, "twilio-long-code", msg("AC1", "+14155550100"), msg("AC1", "+14155550101"), false},
		})
	})
	t.Run("costs", func(t *testing.T) {
		segments := providers.TwilioPreset(providers.TwilioConfig{Segments: func(*http.Request) int { return 3 }})
		checkCosts(t, []costCase{
			{"twilio segments", segments, "twilio-long-code", newReq(ctx, "POST", "https://api.twilio.com/2010-04-01/Accounts/AC1/Messages.json", "x"), 3},
		})
	})
}
