package providers

import (
	"strings"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/header"
)

// Preset is one provider's published quotas as [throttle.Rule] values, with
// the provider's header [header.Dialect] when it has one:
//
//	p := providers.StripePreset(providers.StripeConfig{})
//	client := &http.Client{Transport: throttle.NewTransport(nil, p.Options()...)}
//
// Every rule of a preset matches the provider's hosts only, so presets can
// be combined with each other and with other rules in one Transport. Rule
// names start with the preset's Name and a hyphen ("stripe-global"); they
// are unique within a preset, and [Preset.Named] renames them when one
// Transport needs two presets of the same provider (a live and a test
// Stripe account, say).
//
// Every number is overridable: a Preset is plain data, so edit p.Rules (or
// the rule [Preset.Rule] returns) before passing it on. The constructors'
// docs cite the source of every number; those PROVIDERS research could not
// confirm from the provider's own pages are marked "unconfirmed".
//
// Bursts: GCRA admits Burst + Rate·t requests in any span t. Unless a
// constructor says otherwise, a rule's Burst is 1 % of its Rate (at least
// 1), so that with the default headroom of [throttle.WithHeadroom] (2 %) a preset stays under a
// quota counted on a strict window of its Period with half the headroom
// left for network jitter. A provider that documents a bigger bucket
// (Shopify) gets that bucket.
//
// Partition keys that are secrets (the Authorization header, API keys) are
// only ever passed to the Transport, which hashes them before using or
// storing them.
//
// The zero Preset has no rules and no dialect. A Preset is a value: it is
// not safe to modify while another goroutine reads it, but the functions in
// its rules (Match.Func, Key, Cost) are safe for concurrent use.
type Preset struct {
	// Name is the provider, lowercase ("stripe"); it prefixes every rule's
	// name.
	Name string

	// Rules are the provider's quotas.
	Rules []throttle.Rule

	// Dialect reads the provider's rate-limit headers beyond the standard
	// ones; nil when the standard parsers suffice.
	Dialect header.Dialect
}

// Options returns the options that give a Transport the preset's rules
// and, when it has one, its dialect: the Transport then reads the
// provider's answers (a 429 and its wait) and pauses the preset's buckets
// for the whole fleet. Later changes to p have no effect on them.
//
//	t := throttle.NewTransport(nil, append(p.Options(), throttle.WithRedis(rdb))...)
func (p Preset) Options() []throttle.Option {
	opts := []throttle.Option{throttle.WithRules(append([]throttle.Rule(nil), p.Rules...)...)}
	if p.Dialect != nil {
		opts = append(opts, throttle.WithDialects(p.Dialect))
	}
	return opts
}

// Rule returns the rule of p named name, for editing in place, or nil if p
// has none. The pointer is into p.Rules, which copies of p share.
func (p Preset) Rule(name string) *throttle.Rule {
	for i := range p.Rules {
		if p.Rules[i].Name == name {
			return &p.Rules[i]
		}
	}
	return nil
}

// Named returns a copy of p whose Name is name and whose rules' names start
// with name instead of p.Name, so that one Transport can hold two presets of
// the same provider. The copy has its own Rules slice.
func (p Preset) Named(name string) Preset {
	q := p
	q.Name = name
	q.Rules = make([]throttle.Rule, len(p.Rules))
	for i, r := range p.Rules {
		if rest, ok := strings.CutPrefix(r.Name, p.Name); ok && p.Name != "" {
			r.Name = name + rest
		} else {
			r.Name = name + "-" + r.Name
		}
		q.Rules[i] = r
	}
	return q
}
