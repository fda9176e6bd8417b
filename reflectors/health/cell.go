package health

import (
	"context"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
)

// Source is the health checker's identity as a source. It writes
// verdicts, which carry no source, so its priority (the lowest of the
// registered ones) never decides anything.
var Source = lb.MustRegisterSource("health", 50)

// Cell is health checking, off unless --health (probes) or
// --health-passive (the datapath's connection reports, through the
// *Passive it provides, nil otherwise): it provides a Reporter
// (which ignores reports while health checking is off) and, when on,
// runs the checker as the "health" source. It needs tables.Cell,
// job.Cell and a cell.Health provider; with metrics.Cell its metrics are
// in the hive's registry. A Clock in the hive replaces the wall clock
// (tests).
var Cell = cell.Module(
	"health",
	"Probes backends and takes failing ones out of rotation",

	cell.Config(DefaultConfig),
	cell.ProvidePrivate(newCellChecker),
	cell.Provide(func(c *checker) Reporter {
		if c == nil {
			return nopReporter{}
		}
		return c
	}),
	cell.Provide(newPassive),
	cell.Invoke(registerSource),
)

type checkerParams struct {
	cell.In

	Config     Config
	Clock      Clock                 `optional:"true"`
	Registerer prometheus.Registerer `optional:"true"`
}

// newCellChecker returns the checker, or nil when health checking is off.
func newCellChecker(p checkerParams) (*checker, error) {
	if !p.Config.Health && !p.Config.HealthPassive {
		return nil, nil
	}
	cfg, err := p.Config.parse()
	if err != nil {
		return nil, err
	}
	clock := p.Clock
	if clock == nil {
		clock = RealClock{}
	}
	return newChecker(cfg, clock, newMetrics(p.Registerer)), nil
}

// newPassive is the datapath's way in, nil without --health-passive.
func newPassive(c *checker, cfg Config) *Passive {
	if c == nil || !cfg.HealthPassive {
		return nil
	}
	return &Passive{c: c}
}

type sourceParams struct {
	cell.In

	Source  reflectors.Params
	DB      *statedb.DB
	Checker *checker
	Config  Config
}

func registerSource(p sourceParams) error {
	if p.Checker == nil {
		return nil
	}
	return reflectors.Register(p.Source, Source, func(ctx context.Context, s *reflectors.Source) error {
		c := p.Config
		s.Log().Info("Health checking backends", "probes", c.Health, "passive", c.HealthPassive,
			"interval", c.HealthInterval, "timeout", c.HealthTimeout,
			"consecutive_failures", c.HealthConsecutiveFailures, "networks", c.HealthNetworks)
		return p.Checker.run(ctx, s, p.DB)
	})
}
