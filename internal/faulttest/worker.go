package faulttest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/throttlekit/throttle"
	"github.com/throttlekit/throttle/internal/fleettest"
)

// ExtraModeLog is the [fleettest.WorkerConfig.Extra] key naming the file a
// worker appends its mode changes to, one [ModeRecord] per line. The
// file is created if need be; each worker should have its own.
const ExtraModeLog = "mode_log"

// ModeRecord is one mode change of one worker, as logged.
type ModeRecord struct {
	Worker int       `json:"worker"`
	From   string    `json:"from"` // throttle.Mode.String()
	To     string    `json:"to"`
	At     time.Time `json:"at"` // the worker's wall clock
	Err    string    `json:"err,omitempty"`
}

// Options is the [fleettest.OptionsFunc] of these tests. It turns
// cfg.Fallback ("local", "open" or "closed") into
// [throttle.WithOutageMode], cfg.RedisTimeout into
// [throttle.WithRedisTimeout], and Extra[ExtraModeLog] into a
// [throttle.WithOnModeChange] callback that logs every change there. Any
// other Extra key is an error, so that no knob is silently ignored.
func Options(cfg fleettest.WorkerConfig) ([]throttle.Option, error) {
	var opts []throttle.Option
	switch cfg.Fallback {
	case "":
	case "local":
		opts = append(opts, throttle.WithOutageMode(throttle.ModeFallback))
	case "open":
		opts = append(opts, throttle.WithOutageMode(throttle.ModeFailOpen))
	case "closed":
		opts = append(opts, throttle.WithOutageMode(throttle.ModeFailClosed))
	default:
		return nil, fmt.Errorf("faulttest: Fallback %q: want local, open or closed", cfg.Fallback)
	}
	if cfg.RedisTimeout > 0 {
		opts = append(opts, throttle.WithRedisTimeout(cfg.RedisTimeout))
	}
	for k, v := range cfg.Extra {
		if k != ExtraModeLog {
			return nil, fmt.Errorf("faulttest: unknown Extra knob %q", k)
		}
		// The file stays open for the life of the worker process: the
		// callback may run until the very end, and the exit closes it.
		f, err := os.OpenFile(v, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("faulttest: mode log: %w", err)
		}
		opts = append(opts, throttle.WithOnModeChange(logModes(cfg.ID, f)))
	}
	return opts, nil
}

// logModes returns a callback writing each change to f as one JSON line.
// The Transport calls it one change at a time, so lines never interleave.
func logModes(worker int, f *os.File) func(throttle.ModeChange) {
	return func(c throttle.ModeChange) {
		rec := ModeRecord{Worker: worker, From: c.From.String(), To: c.To.String(), At: c.At}
		if c.Err != nil {
			rec.Err = c.Err.Error()
		}
		b, err := json.Marshal(rec)
		if err == nil {
			_, err = f.Write(append(b, '\n'))
		}
		if err != nil {
			// The parent finds the change missing and fails; say why.
			fmt.Fprintf(os.Stderr, "faulttest: log mode change %+v: %v\n", rec, err)
		}
	}
}

// ReadModeLog returns the changes logged in the file at path, in the order
// they happened. A missing file means no change was logged.
func ReadModeLog(path string) ([]ModeRecord, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("faulttest: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only: a close error loses nothing
	var out []ModeRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec ModeRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("faulttest: %s: line %q: %w", path, sc.Text(), err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("faulttest: %s: %w", path, err)
	}
	return out, nil
}
