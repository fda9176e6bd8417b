package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/api"
)

// rowsPath is api.RowsPath as a path below the agent's base URL.
var rowsPath = strings.TrimPrefix(api.RowsPath, "/")

// defaultTimeout is --timeout's default.
const defaultTimeout = 10 * time.Second

// addTimeoutFlag registers --timeout.
func addTimeoutFlag(fs *pflag.FlagSet) *time.Duration {
	return fs.Duration("timeout", defaultTimeout, "How long the agent may take to answer, or stay silent while it answers (a --watch stream, once open, may stay quiet)")
}

// agentClient reads a running agent's HTTP API. Each request ends when
// the agent stays silent for timeout: to connect, to answer, or between
// two reads of its answer, so a large table may take longer as long as it
// keeps coming, and an agent that hangs does not hang lbctl.
type agentClient struct {
	base    *url.URL
	timeout time.Duration
	learned bool // learnSources ran
	// archive answers in place of an agent (--dump): lbctl dump's.
	archive *dumpArchive
}

// newAgentClient returns a client of the agent at api (--api) that waits
// up to timeout (--timeout).
func newAgentClient(api string, timeout time.Duration) (*agentClient, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("--timeout %v: give a duration above zero, such as %v", timeout, defaultTimeout)
	}
	base, err := agentURL(api)
	if err != nil {
		return nil, err
	}
	return &agentClient{base: base, timeout: timeout}, nil
}

// answer is the body of the agent's answer to one request. Its reads keep
// the request alive; Close ends it.
type answer struct {
	body   io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	silent *time.Timer
	wait   time.Duration
}

func (a *answer) Read(p []byte) (int, error) {
	n, err := a.body.Read(p)
	if n > 0 && a.silent != nil {
		a.silent.Reset(a.wait)
	}
	if err != nil && err != io.EOF {
		err = a.err(err)
	}
	return n, err
}

func (a *answer) Close() error {
	a.stream()
	a.cancel(nil)
	return a.body.Close()
}

// stream lets the rest of the answer take as long as it takes: a watch.
func (a *answer) stream() {
	if a.silent != nil {
		a.silent.Stop()
		a.silent = nil
	}
}

// err is the timeout, if that is what ended the request.
func (a *answer) err(err error) error {
	if cause, silent := errors.AsType[*silentError](context.Cause(a.ctx)); silent {
		return cause
	}
	return err
}

// get sends GET path (with body, if any) and returns the answer, or an
// error saying what the agent answered instead.
func (c *agentClient) get(path string, query url.Values, body []byte) (*answer, error) {
	if c.archive != nil {
		return c.archive.get(path, query, body)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &answer{ctx: ctx, cancel: cancel, wait: c.timeout}
	a.silent = time.AfterFunc(c.timeout, func() { cancel(&silentError{c.base, c.timeout}) })
	u := c.base.JoinPath(path)
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), bytes.NewReader(body))
	if err != nil {
		cancel(nil)
		return nil, err
	}
	// The agent is on loopback: compressing its answers (the metrics
	// would be) only costs it time.
	req.Header.Set("Accept-Encoding", "identity")
	// The agent refuses a request of another version than its own, and
	// says so, rather than answer in a form this lbctl would misread.
	req.Header.Set(api.VersionHeader, strconv.Itoa(api.ReadAPIVersion))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.stream()
		cancel(nil)
		return nil, c.agentError(a.err(err))
	}
	a.body = resp.Body
	if resp.StatusCode != http.StatusOK {
		defer a.Close()
		se := newStatusError(u.String(), resp)
		// An agent that predates the versioned read API has no rows to
		// serve, and says nothing of a version.
		se.unversioned = resp.StatusCode == http.StatusNotFound && resp.Header.Get(api.VersionHeader) == "" && strings.HasPrefix(path, rowsPath)
		return nil, se
	}
	return a, nil
}

// statusError is an answer other than 200.
type statusError struct {
	url, status string
	code        int
	msg         string // the start of the answer: what the agent says is wrong
	// unversioned: the server does not serve the read API this lbctl
	// speaks (api.ReadAPIVersion), nor say which it serves.
	unversioned bool
}

func newStatusError(url string, resp *http.Response) *statusError {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	var res struct{ Err string } // StateDB's errors are JSON
	if json.Unmarshal(msg, &res) == nil && res.Err != "" {
		msg = []byte(res.Err)
	}
	return &statusError{url: url, status: resp.Status, code: resp.StatusCode, msg: strings.TrimSpace(string(msg))}
}

func (e *statusError) Error() string {
	if e.unversioned {
		return fmt.Sprintf("%s answered %s: %s (is --api the agent's address, its --api-addr? An agent older than this lbctl serves no lbstate read API version %d at %s: use the lbctl of its release)",
			e.url, e.status, e.msg, api.ReadAPIVersion, api.RowsPath)
	}
	return fmt.Sprintf("%s answered %s: %s (is --api the agent's address, its --api-addr?)", e.url, e.status, e.msg)
}

// silentError ends a request to an agent that stayed silent too long.
type silentError struct {
	base    *url.URL
	timeout time.Duration
}

func (e *silentError) Error() string {
	return fmt.Sprintf("the agent at %s did not answer within %v (--timeout)", e.base, e.timeout)
}

// noAgentError is a request nobody took.
type noAgentError struct{ base *url.URL }

func (e *noAgentError) Error() string {
	return fmt.Sprintf("no agent at %s: start one (%s) or give its --api", e.base, startAgent)
}

// agentError says what went wrong with a request the agent did not
// answer.
func (c *agentClient) agentError(err error) error {
	var opErr *net.OpError
	switch {
	case errors.As(err, new(*silentError)):
		return err
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return &noAgentError{c.base}
	}
	return fmt.Errorf("agent at %s: %w (is --api the agent's address?)", c.base, err)
}

// isStatus says whether err is an answer with code.
func isStatus(err error, code int) bool {
	se, ok := errors.AsType[*statusError](err)
	return ok && se.code == code
}
