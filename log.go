package throttle

import (
	"context"
	"log/slog"
)

// WithLogger makes the Transport log its events (see [Event]) to l, one
// line per event, at a level by what it means:
//
//   - Debug: a slot acquired, a request queued or dequeued, a lease
//     acquired or released, a Redis call answered: the ordinary course of
//     requests.
//   - Info: a fleet-wide pause, a bucket capped by the server's feedback,
//     a retry, a return to the shared buckets ([ModeShared]).
//   - Warn: a request rejected without being sent, a response rate
//     limited by the server, a lease lost, a switch to an outage mode, a
//     Redis call that failed.
//
// Each line carries the request's method and host and the rule's name,
// and the event's own fields (the wait in seconds, the reason, the
// status, the dialect that recognised a rate-limited response); never a
// header, the URL's path or query, or a partition key.
// Lines below l's level cost a call to its handler's Enabled, and nothing
// else. A nil l, like no WithLogger (the default), logs nothing. l must be
// safe for concurrent use, as every [*slog.Logger] is. WithLogger adds an
// observer, as [WithObserver] does.
func WithLogger(l *slog.Logger) Option {
	if l == nil {
		return nil
	}
	return WithObserver(logObserver{l})
}

// logObserver logs events to a logger (WithLogger).
type logObserver struct{ l *slog.Logger }

// level returns the level of e's line.
func level(e Event) slog.Level {
	switch e.Kind {
	case EventPaused, EventCapped, EventRetry:
		return slog.LevelInfo
	case EventRejected, EventRateLimited, EventLeaseLost:
		return slog.LevelWarn
	case EventStoreCall:
		if e.Err != nil {
			return slog.LevelWarn
		}
	case EventModeChange:
		if e.To == ModeShared || e.To == ModeLocal {
			return slog.LevelInfo
		}
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

var logMessages = [...]string{
	EventAcquired:      "throttle: slot acquired",
	EventRejected:      "throttle: request rejected",
	EventQueued:        "throttle: request queued",
	EventDequeued:      "throttle: request dequeued",
	EventRateLimited:   "throttle: response rate limited",
	EventPaused:        "throttle: fleet paused",
	EventCapped:        "throttle: bucket capped by the server's feedback",
	EventRetry:         "throttle: retrying",
	EventLeaseAcquired: "throttle: lease acquired",
	EventLeaseReleased: "throttle: lease released",
	EventLeaseLost:     "throttle: lease lost",
	EventModeChange:    "throttle: mode changed",
	EventStoreCall:     "throttle: redis call",
	EventQuota:         "throttle: quota read",
}

func (o logObserver) Observe(e Event) {
	ctx := context.Background()
	lv := level(e)
	if !o.l.Enabled(ctx, lv) {
		return
	}
	msg := "throttle: " + e.Kind.String()
	if e.Kind > 0 && int(e.Kind) < len(logMessages) {
		msg = logMessages[e.Kind]
	}
	as := make([]slog.Attr, 0, 8)
	if e.Kind == EventModeChange {
		as = append(as, slog.String("from", e.From.String()), slog.String("to", e.To.String()))
		if e.Err != nil {
			as = append(as, slog.String("error", e.Err.Error()))
		}
		o.l.LogAttrs(ctx, lv, msg, as...)
		return
	}
	as = append(as, slog.String("method", e.Method), slog.String("host", e.Host), slog.String("rule", e.Rule))
	switch e.Kind {
	case EventAcquired, EventQueued, EventPaused, EventLeaseAcquired, EventLeaseReleased, EventLeaseLost:
		as = append(as, slog.Duration("wait", e.Wait))
	case EventRejected:
		as = append(as, slog.String("reason", e.Reason.String()), slog.String("error", e.Err.Error()))
		if e.Wait > 0 {
			as = append(as, slog.Duration("wait", e.Wait))
		}
	case EventRateLimited:
		as = append(as, slog.Int("status", e.Status))
		if e.HasWait {
			as = append(as, slog.Duration("retry_after", e.Wait))
		}
		if e.ServerReason != "" {
			as = append(as, slog.String("server_reason", e.ServerReason))
		}
		if e.Dialect != "" {
			as = append(as, slog.String("dialect", e.Dialect))
		}
	case EventCapped:
		as = append(as, slog.Float64("cap_rate", e.CapRate))
		if e.HasRemaining {
			as = append(as, slog.Int64("remaining", e.Remaining))
		}
	case EventQuota:
		as = append(as, slog.Int64("limit", e.Limit), slog.Int64("remaining", e.Remaining),
			slog.Float64("estimate", e.Estimate), slog.Duration("window", e.Window))
	case EventRetry:
		as = append(as, slog.Int("attempt", e.Attempt), slog.Duration("delay", e.Wait))
	case EventStoreCall:
		as = append(as, slog.String("call", e.Call), slog.Duration("duration", e.Wait))
		if e.Err != nil {
			as = append(as, slog.String("error", e.Err.Error()))
		}
	}
	o.l.LogAttrs(ctx, lv, msg, as...)
}
