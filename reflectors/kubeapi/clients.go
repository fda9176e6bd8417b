package kubeapi

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/cilium/hive/cell"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Clients are one API server's clients, as the Kubernetes sources take
// them from the hive: a clientset, a metadata client (every Node's
// labels) and a dynamic client (the CRD-backed kinds).
type Clients struct {
	cell.Out

	Client   kubernetes.Interface
	Metadata metadata.Interface
	Dynamic  dynamic.Interface
}

// NewClients builds Clients for cfg, with a transport that does not let
// a restarting API server hold a watch back longer than needed (see
// CapStartingRetryAfter).
func NewClients(cfg *rest.Config) (Clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(CapStartingRetryAfter)
	var c Clients
	var err error
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return Clients{}, err
	}
	if c.Metadata, err = metadata.NewForConfig(cfg); err != nil {
		return Clients{}, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return Clients{}, err
	}
	return c, nil
}

// startingRetryAfter is the Retry-After, in seconds, that
// CapStartingRetryAfter leaves on an answer that the API server is still
// starting.
const startingRetryAfter = 1

// startingMessages are what a restarted API server answers, past
// /readyz, while it is still setting up a resource: 503 until the
// paths of CRD-backed kinds are installed, then 429 until the
// resource's watch cache is built.
var startingMessages = [][]byte{
	[]byte("before all known HTTP paths have been installed"),
	[]byte("storage is (re)initializing"),
}

// CapStartingRetryAfter wraps a transport so that an API server's answer
// that it is still starting (see startingMessages) asks the client to
// retry after at most a second. A restarted API server sends those with
// a Retry-After of 5 s, or one that grows with how long the resource's
// cache was down (up to 30 s), and client-go's REST client sleeps all of
// it, though the resource is usually served well before: after an
// outage, changes to CRD-backed kinds reached the maps 5-7 s after
// /readyz, against under a second for built-in kinds. Other 429s and
// 503s (priority and fairness turning clients away, an overloaded
// server) keep the server's Retry-After.
func CapStartingRetryAfter(rt http.RoundTripper) http.RoundTripper {
	return capRetryAfter{rt}
}

type capRetryAfter struct{ next http.RoundTripper }

func (c capRetryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || after <= startingRetryAfter {
		return resp, nil
	}
	// The Status is small; read a bounded prefix, and give the body back
	// whole.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	for _, m := range startingMessages {
		if bytes.Contains(head, m) {
			resp.Header = resp.Header.Clone()
			resp.Header.Set("Retry-After", strconv.Itoa(startingRetryAfter))
			break
		}
	}
	return resp, nil
}

// WrappedRoundTripper lets client-go reach the transport underneath
// (utilnet.RoundTripperWrapper), e.g. to close idle connections.
func (c capRetryAfter) WrappedRoundTripper() http.RoundTripper { return c.next }
