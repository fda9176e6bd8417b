package lb

import "time"

// HealthVerdict is a health checker's verdict on a backend address: the
// input to Writer.SetBackendVerdict. Since and LastError are for people
// (lbctl backends); only Healthy affects selection.
type HealthVerdict struct {
	Healthy bool `json:"healthy" yaml:"healthy"`
	// Since is when the verdict last changed; zero if unknown.
	Since time.Time `json:"since,omitzero" yaml:"since,omitempty"`
	// LastError is the last failure the checker saw, kept after recovery
	// so that a flapping backend says why it flaps; empty if none.
	LastError string `json:"lastError,omitempty" yaml:"lastError,omitempty"`
}

// Equal reports whether v and o say the same (Since compared as an
// instant).
func (v HealthVerdict) Equal(o HealthVerdict) bool {
	return v.Healthy == o.Healthy && v.Since.Equal(o.Since) && v.LastError == o.LastError
}

// Verdict returns the health verdict recorded on the backend.
func (b *Backend) Verdict() HealthVerdict {
	return HealthVerdict{Healthy: !b.Unhealthy, Since: b.HealthSince(), LastError: b.HealthError()}
}

// WithVerdict returns a copy of b carrying v.
func (b *Backend) WithVerdict(v HealthVerdict) *Backend {
	c := *b
	c.Unhealthy, c.health = !v.Healthy, nil
	if !v.Since.IsZero() || v.LastError != "" {
		c.health = &healthDetails{since: v.Since, err: v.LastError}
	}
	if len(c.Instances) == 1 { // in one allocation, not keeping b's alive
		return c.withOneInstance(c.Instances[0])
	}
	return &c
}

// healthColumns prints the verdict for TableRow: health, since when
// (UTC, to the second) and the last error.
func (b *Backend) healthColumns() []string {
	health := "healthy"
	if b.Unhealthy {
		health = "unhealthy"
	}
	since := ""
	if t := b.HealthSince(); !t.IsZero() {
		since = t.UTC().Format(time.RFC3339)
	}
	return []string{health, since, b.HealthError()}
}
