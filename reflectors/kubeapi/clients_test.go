package kubeapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A restarted API server's answers that it is still setting a resource
// up (503 before its paths are installed, 429 while its storage
// initializes) are retried after a second, whatever the server's
// Retry-After; any other 429 or 503 keeps the server's; the body reaches
// the client whole.
func TestStartingAPIServerIsRetriedAfterASecond(t *testing.T) {
	for _, c := range []struct {
		body, after, want string
		code              int
	}{
		{`{"kind":"Status","message":"the request has been made before all known HTTP paths have been installed, please try again","reason":"ServiceUnavailable","code":503}`, "5", "1", 503},
		{`{"kind":"Status","message":"the server is currently unable to handle the request","reason":"ServiceUnavailable","code":503}`, "5", "5", 503},
		{`{"kind":"Status","message":"storage is (re)initializing","reason":"TooManyRequests","code":429}`, "5", "1", 429},
		{`{"kind":"Status","message":"storage is (re)initializing","reason":"TooManyRequests","code":429}`, "1", "1", 429},
		{`{"kind":"Status","message":"Too many requests, please try again later.","reason":"TooManyRequests","code":429}`, "5", "5", 429},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", c.after)
			w.WriteHeader(c.code)
			io.WriteString(w, c.body)
		}))
		client := &http.Client{Transport: CapStartingRetryAfter(http.DefaultTransport)}
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if got := resp.Header.Get("Retry-After"); got != c.want {
			t.Errorf("Retry-After %s for %s: got %s, want %s", c.after, c.body, got, c.want)
		}
		if string(body) != c.body {
			t.Errorf("body %q, want %q", body, c.body)
		}
	}
}
