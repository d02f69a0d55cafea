package exrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Server is what a simulated provider tells of one phase: the requests that
// reached it and how many it answered 429 (retried ones included, which the
// SDK's caller never sees), and how many it admitted.
type Server interface {
	Counts() (arrived, limited, admitted int)
}

// refusedBy is a Server that also tells which rules refused: the summary
// line names them.
type refusedBy interface {
	RefusedBy() string
}

// Phase is one run of an example's workers.
type Phase struct {
	// Name names the phase in its lines ("without the throttle").
	Name string
	// Duration is how long the workers call.
	Duration time.Duration
	// Quota is the provider's quota, in requests per second, that the
	// achieved rate is set against.
	Quota float64
	// Workers is how many workers call at once.
	Workers int
	// Server counts what the provider saw.
	Server Server
	// Limited names the server's refusals in the lines; "429s" if empty.
	Limited string
	// Meter, if not nil, gives the waits for a slot (the throttled phase's
	// Transport reports to it).
	Meter *Meter
	// Out receives the progress and the summary; TTY says it is a
	// terminal, where the progress is one line rewritten every second
	// (plain lines otherwise).
	Out io.Writer
	TTY bool
}

// Summary is what a phase measured. Elapsed runs from the start to the end
// of the last call: a call that was waiting for its slot when the phase
// ended counts, and so does its time.
type Summary struct {
	Name              string
	LimitedName       string // what Limited counts, "429s" if empty
	Elapsed           time.Duration
	Quota             float64
	Requests, Limited int    // as the server saw them
	LimitedBy         string // the rules that refused, when the server tells them
	Admitted          int
	WaitP50, WaitP99  time.Duration
}

// Rate is the admitted requests per second.
func (s Summary) Rate() float64 { return float64(s.Admitted) / s.Elapsed.Seconds() }

// Utilisation is the fraction of the quota used.
func (s Summary) Utilisation() float64 { return s.Rate() / s.Quota }

// limitedName is what a phase's refusals are called in its lines.
func limitedName(name string) string {
	if name == "" {
		return "429s"
	}
	return name
}

// String is the summary line; it names the rules that refused, when the
// server told them.
func (s Summary) String() string {
	by := ""
	if s.LimitedBy != "" {
		by = " (" + s.LimitedBy + ")"
	}
	return fmt.Sprintf("%s: %d requests, %d %s%s, %.1f/s admitted of %.0f/s quota (%.0f %%), wait p50 %v p99 %v",
		s.Name, s.Requests, s.Limited, limitedName(s.LimitedName), by, s.Rate(), s.Quota, 100*s.Utilisation(),
		s.WaitP50.Round(time.Millisecond), s.WaitP99.Round(time.Millisecond))
}

// ErrStop, returned by a worker's call, ends that worker without error.
var ErrStop = errors.New("exrun: stop")

// Run calls call from p.Workers workers until p.Duration has passed (the
// context given to call ends then; a call already waiting may finish
// later), printing progress every second, then prints the summary line and
// returns the summary. A call's error other than ErrStop or the end of the
// phase's context ends the run with that error, once every worker is done.
func Run(ctx context.Context, p Phase, call func(ctx context.Context, worker, n int) error) (Summary, error) {
	if p.Workers < 1 || p.Duration <= 0 || p.Quota <= 0 {
		return Summary{}, errors.New("exrun: workers, duration and quota must be positive")
	}
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(p.Duration))
	defer cancel()

	stop := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(p, start, stop)
	}()

	var wg sync.WaitGroup
	errs := make(chan error, p.Workers)
	for w := range p.Workers {
		wg.Go(func() {
			for n := 0; runCtx.Err() == nil; n++ {
				err := call(runCtx, w, n)
				switch {
				case err == nil:
				case errors.Is(err, ErrStop):
					return
				case runCtx.Err() != nil:
					return // cut short by the end of the phase
				default:
					errs <- fmt.Errorf("worker %d, call %d: %w", w+1, n+1, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	<-progressDone
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}

	arrived, limited, admitted := p.Server.Counts()
	s := Summary{Name: p.Name, LimitedName: p.Limited, Elapsed: elapsed, Quota: p.Quota, Requests: arrived, Limited: limited, Admitted: admitted}
	if p.Meter != nil {
		s.WaitP50, s.WaitP99 = p.Meter.Quantile(0.5), p.Meter.Quantile(0.99)
	}
	if rb, ok := p.Server.(refusedBy); ok {
		s.LimitedBy = rb.RefusedBy()
	}
	if _, err := fmt.Fprintln(p.Out, s.String()); err != nil {
		all = append(all, err)
	}
	return s, errors.Join(all...)
}

// progress prints, every second until stop closes, the phase's counts so
// far: on a terminal one line rewritten in place, otherwise a line a second.
// A progress line that cannot be written is dropped: the summary's write,
// which Run checks, fails too.
func progress(p Phase, start time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			if p.TTY {
				_, _ = io.WriteString(p.Out, "\r\x1b[K")
			}
			return
		case now := <-tick.C:
			arrived, limited, admitted := p.Server.Counts()
			el := now.Sub(start)
			line := fmt.Sprintf("%s: %2.0fs/%v  %d requests  %d %s  %.1f/s admitted (quota %.0f/s)",
				p.Name, el.Seconds(), p.Duration, arrived, limited, limitedName(p.Limited), float64(admitted)/el.Seconds(), p.Quota)
			if p.TTY {
				_, _ = io.WriteString(p.Out, "\r\x1b[K"+line)
			} else {
				_, _ = io.WriteString(p.Out, line+"\n")
			}
		}
	}
}

// IsTerminal reports whether f is a terminal (a character device), where
// the progress line may be rewritten in place.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
