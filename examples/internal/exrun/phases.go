package exrun

import (
	"context"
	"fmt"
	"io"

	"github.com/throttlekit/throttle/examples/internal/exredis"
)

// RunPhases is an example's whole run: it opens the store at redisURL (the
// embedded miniredis when empty), writes head and which store it uses to
// out, then runs phase twice, first without the throttle (store nil), then
// with it, and returns the two phases' summaries. It stops at the first
// error.
func RunPhases(ctx context.Context, out io.Writer, redisURL, head string, phase func(context.Context, *exredis.Store) (Summary, error)) (without, with Summary, err error) {
	store, err := exredis.Open(redisURL)
	if err != nil {
		return without, with, err
	}
	defer store.Close()
	if _, err := fmt.Fprintf(out, "%sStore: %s.\n", head, store.Desc); err != nil {
		return without, with, err
	}
	if without, err = phase(ctx, nil); err != nil {
		return without, with, err
	}
	with, err = phase(ctx, store)
	return without, with, err
}
