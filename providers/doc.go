// Package providers knows the rate limits of specific API providers: their
// published quotas as ready-made rules (presets), and the rate-limit
// headers they send beyond the standard ones (dialects).
//
// # Presets
//
// A [Preset] is one provider's quotas as [throttle.Rule] values, with the
// provider's dialect when it has one, built by a constructor that takes the
// provider's Config: [StripePreset], [GitHubPreset], [TwilioPreset],
// [ShopifyPreset], [SlackPreset], [DiscordPreset], [OpenAIPreset],
// [AnthropicPreset], [SendGridPreset], [HubSpotPreset] and
// [SalesforcePreset]. Its Options give a Transport the rules and the
// dialect:
//
//	p := providers.StripePreset(providers.StripeConfig{})
//	client := &http.Client{Transport: throttle.NewTransport(nil,
//		append(p.Options(), throttle.WithRedis(rdb))...)}
//
// Every rule matches the provider's hosts only, so presets combine with
// each other and with rules of your own in one Transport. A Preset is plain
// data: edit a rule ([Preset.Rule]) before passing it on, and rename a copy
// ([Preset.Named]) to hold two accounts of one provider. Each constructor's
// doc cites the source of every number and marks those the provider does
// not confirm.
//
// Some limits depend on what a request carries in its body, which a rule
// must not read: the Twilio sender and the Slack channel. Name them in the
// request's context with [WithTwilioSender] and [WithSlackChannel]:
//
//	ctx = providers.WithTwilioSender(ctx, "+14155550101")
//	req, err := http.NewRequestWithContext(ctx, "POST", messagesURL, body)
//
// Partition keys that are secrets (the Authorization header, API keys) are
// only ever passed to the Transport, which hashes them before using or
// storing them.
//
// # Dialects
//
// A dialect is a [header.Dialect] reading a provider's rate-limit
// headers beyond the standard fields that [header.Parse] always reads
// (Retry-After, retry-after-ms, X-RateLimit-*, IETF RateLimit): [OpenAI],
// [Anthropic], [Shopify], [GitHub], [Discord], [Stripe], [Salesforce],
// [HubSpot] and [Twilio]. A preset's Options include its dialect; give
// others to a Transport with [throttle.WithDialects], or to header.Parse
// directly:
//
//	sig := header.Parse(resp.StatusCode, resp.Header, time.Now(), 0, providers.GitHub)
//
// Every dialect is stateless, safe for concurrent use, and never panics on
// any input; values longer than 256 bytes are ignored. Durations are left
// uncapped (never negative) by the dialects: header.Parse caps them after
// the last dialect, and code that calls a dialect's Parse directly should call
// [header.Signal.Normalize] afterwards. The package variables are Dialect
// values meant to be read, never reassigned. Package header tells how to
// write a dialect of your own.
//
// A dialect that finds one of its provider's own fields in a response
// names itself in [header.Signal.Dialect], with its preset's Name
// ("openai", "anthropic", "shopify", "github", "discord", "stripe",
// "salesforce", "hubspot", "twilio"; SendGrid and Slack have no dialect),
// and leaves it alone otherwise: the Transport's rate-limited event
// carries it ([throttle.Event.Dialect]), and the exporters count
// rate-limited responses by it. The standard fields alone (Retry-After,
// X-RateLimit-*), which many providers send, name no dialect.
//
// # Examples
//
// The repository's examples (a module of their own, examples/) run presets
// under the providers' SDKs against strict local stand-ins for the
// providers: go -C examples run ./stripe (replicas' stripe-go clients
// sharing Stripe's quota through Redis) and go -C examples run ./twilio
// (twilio-go sending from several senders, each held to its rate).
package providers
