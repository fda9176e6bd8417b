// Package healthlog records what cells report to their cell.Health, in
// order, for tests that wait for a status ("OK Synced", "Degraded
// reason: error").
package healthlog

import (
	"fmt"
	"sync"

	"github.com/cilium/hive/cell"
)

// Log is every report made to Health and its scopes. Its zero value is
// ready to use; provide it with cell.Provide(log.Health).
type Log struct {
	mu      sync.Mutex
	reports []string
}

// Health is a cell.Health whose reports, and its scopes', go to l.
func (l *Log) Health() cell.Health { return reporter{l} }

// Last is the latest report ("" before any).
func (l *Log) Last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.reports) == 0 {
		return ""
	}
	return l.reports[len(l.reports)-1]
}

// All is every report so far.
func (l *Log) All() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reports...)
}

func (l *Log) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reports = append(l.reports, s)
}

type reporter struct{ log *Log }

func (r reporter) OK(status string) { r.log.add("OK " + status) }
func (r reporter) Stopped(string)   {}
func (r reporter) Degraded(reason string, err error) {
	r.log.add(fmt.Sprintf("Degraded %s: %v", reason, err))
}
func (r reporter) NewScope(string) cell.Health { return r }
func (r reporter) Close()                      {}
