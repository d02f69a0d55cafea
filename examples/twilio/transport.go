package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/twilio/twilio-go/client"

	"github.com/throttlekit/throttle/providers"
)

// twilioAPI is the base of the URLs twilio-go's Api service calls.
const twilioAPI = "https://api.twilio.com"

// localClient is a client.BaseClient that sends twilio-go's requests for
// api.twilio.com to BaseURL instead: twilio-go has no setting for its base
// URL (its services build URLs from a constant), and its BaseClient
// interface is where a request's URL passes last.
type localClient struct {
	*client.Client
	BaseURL string
}

// SendRequest sends the request to BaseURL in place of api.twilio.com.
func (c *localClient) SendRequest(method, rawURL string, data url.Values, headers map[string]any, body ...byte) (*http.Response, error) {
	if rest, ok := strings.CutPrefix(rawURL, twilioAPI); ok {
		rawURL = c.BaseURL + rest
	}
	return c.Client.SendRequest(method, rawURL, data, headers, body...)
}

// maxErrorBody bounds what senderTransport reads of an error response.
const maxErrorBody = 64 << 10

// senderTransport names the sender From in each request's context for
// providers.TwilioPreset's per-sender rules, and sends it through Base.
// twilio-go makes every request with context.Background(), so Ctx, the
// phase's, replaces it: its deadline ends the waits of the phase's last
// messages with the phase (throttle.ErrBeyondDeadline for a slot beyond it)
// instead of after the Transport's maximum wait.
// twilio-go never closes the body of an error response (client.Client's
// doWithErr decodes it and drops it), which would keep the connection, and
// under a throttle.Transport the request's concurrency lease, until the
// lease's TTL: senderTransport reads such a body into memory and closes
// it. It is safe for concurrent use.
type senderTransport struct {
	Ctx  context.Context
	From string
	Base http.RoundTripper
}

// RoundTrip sends r, named From's, through Base.
func (t *senderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(r.WithContext(providers.WithTwilioSender(t.Ctx, t.From)))
	if err != nil || resp.StatusCode < http.StatusBadRequest {
		return resp, err
	}
	b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}
