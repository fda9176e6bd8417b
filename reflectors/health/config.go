package health

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/pflag"
)

// Config is health checking's configuration (hive flags). The per-Service
// annotations override the probe's settings for a service's backends;
// the breaker's settings are node-wide.
type Config struct {
	// Health turns active health checking (probes) on.
	Health bool
	// HealthPassive turns passive failure accrual on: the reference
	// datapath reports how the TCP connections it balances begin, and
	// each report counts like a probe's result (passive.go). Without
	// Health, nothing is probed.
	HealthPassive bool
	// HealthInterval and HealthTimeout are the probes' defaults.
	HealthInterval time.Duration
	HealthTimeout  time.Duration
	// HealthConsecutiveFailures trip a backend's breaker; as many
	// consecutive successes end its probation.
	HealthConsecutiveFailures int
	// HealthBackoffMin, HealthBackoffMax and HealthBackoffJitter space
	// the probes of a tripped backend: from min, doubling per failure,
	// at most max, less up to the jitter's fraction.
	HealthBackoffMin    time.Duration
	HealthBackoffMax    time.Duration
	HealthBackoffJitter float64
	// HealthMaxConcurrent bounds the probes under way at once.
	HealthMaxConcurrent int
	// HealthNetworks, if set, are the only networks whose backends are
	// probed (CIDR prefixes).
	HealthNetworks []string
}

// DefaultConfig has health checking off.
var DefaultConfig = Config{
	HealthInterval:            5 * time.Second,
	HealthTimeout:             time.Second,
	HealthConsecutiveFailures: 3,
	HealthBackoffMin:          time.Second,
	HealthBackoffMax:          time.Minute,
	HealthBackoffJitter:       0.2,
	HealthMaxConcurrent:       256,
}

// Flags registers the configuration's flags.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.Bool("health", def.Health, "Probe the backends this node's frontends use, and take failing ones out of rotation")
	flags.Bool("health-passive", def.HealthPassive, "Take backends out of rotation on the TCP connections the datapath sees fail (refused, unanswered), with or without --health's probes")
	flags.Duration("health-interval", def.HealthInterval, "Time between probes of a backend (annotation "+AnnotationInterval+")")
	flags.Duration("health-timeout", def.HealthTimeout, "Longest a probe may take (annotation "+AnnotationTimeout+")")
	flags.Int("health-consecutive-failures", def.HealthConsecutiveFailures, "Consecutive failed probes that trip a backend's breaker; as many successes end its probation")
	flags.Duration("health-backoff-min", def.HealthBackoffMin, "Wait before the first probe of a tripped backend; it doubles with every failure")
	flags.Duration("health-backoff-max", def.HealthBackoffMax, "Longest wait between probes of a tripped backend")
	flags.Float64("health-backoff-jitter", def.HealthBackoffJitter, "Fraction of a backoff taken off at random, 0-1, so that backends that tripped together are not probed together")
	flags.Int("health-max-concurrent", def.HealthMaxConcurrent, "Most probes under way at once")
	flags.StringSlice("health-networks", def.HealthNetworks, "Probe only backends in these CIDR prefixes (default: all)")
}

// parsed is a validated Config.
type parsed struct {
	defaults      check
	breaker       breakerConfig
	maxConcurrent int
	networks      []netip.Prefix
	// active: probes run (--health); without it every check is none.
	active bool
}

func (c Config) parse() (parsed, error) {
	switch {
	case c.HealthInterval < minDuration:
		return parsed{}, fmt.Errorf("--health-interval: %s is below %s", c.HealthInterval, minDuration)
	case c.HealthTimeout < minDuration:
		return parsed{}, fmt.Errorf("--health-timeout: %s is below %s", c.HealthTimeout, minDuration)
	case c.HealthConsecutiveFailures < 1:
		return parsed{}, errors.New("--health-consecutive-failures: must be at least 1")
	case c.HealthBackoffMin <= 0 || c.HealthBackoffMax < c.HealthBackoffMin:
		return parsed{}, fmt.Errorf("--health-backoff-min %s, --health-backoff-max %s: want 0 < min <= max", c.HealthBackoffMin, c.HealthBackoffMax)
	case c.HealthBackoffJitter < 0 || c.HealthBackoffJitter >= 1:
		return parsed{}, fmt.Errorf("--health-backoff-jitter: %g is not in [0, 1)", c.HealthBackoffJitter)
	case c.HealthMaxConcurrent < 1:
		return parsed{}, errors.New("--health-max-concurrent: must be at least 1")
	}
	p := parsed{
		defaults: check{interval: c.HealthInterval, timeout: c.HealthTimeout, path: "/", statusMin: 200, statusMax: 399},
		breaker: breakerConfig{threshold: c.HealthConsecutiveFailures,
			backoffMin: c.HealthBackoffMin, backoffMax: c.HealthBackoffMax, jitter: c.HealthBackoffJitter},
		maxConcurrent: c.HealthMaxConcurrent,
		active:        c.Health,
	}
	for _, s := range c.HealthNetworks {
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return parsed{}, fmt.Errorf("--health-networks: %w", err)
		}
		p.networks = append(p.networks, prefix.Masked())
	}
	return p, nil
}
