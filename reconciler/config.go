package reconciler

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/time/rate"

	"github.com/lbstate/lbstate/bpf"
	"github.com/lbstate/lbstate/lb"
)

// Config is the reconciler's configuration (hive flags).
type Config struct {
	// LBAlgorithm is used by services that do not choose one.
	LBAlgorithm string
	// LBMaglevSeed seeds Maglev's hashing; every node must use the same.
	LBMaglevSeed uint32
	// LBMaxWeightedSlots bounds the slots of a service using the random
	// algorithm with unequal weights.
	LBMaxWeightedSlots uint32
	// LBZoneIDs maps zone names to the IDs written into lb_backends.
	LBZoneIDs map[string]string
	// LBRetryMaxBackoff bounds the wait before retrying a frontend whose
	// reconciliation failed (the wait doubles from retryMinBackoff, 50ms,
	// on each failure).
	LBRetryMaxBackoff time.Duration
}

// Waits that an operator has no reason to tune. Config.LBRetryMaxBackoff
// is the one that trades load for recovery time.

// retryMinBackoff is the first wait before retrying a frontend that
// failed to reconcile; the wait doubles up to LBRetryMaxBackoff. (A
// variable, so that a test can leave failed frontends to the retries the
// reconciler asks for itself.)
var retryMinBackoff = 50 * time.Millisecond

// pruneRetryMin and pruneRetryMax bound the wait before a failed prune
// (or a failed delete of unused backends, left for a prune) is tried
// again, doubling in between. Without it the next try would be the
// periodic one, pruneInterval away, with stale entries in the maps until
// then. (Variables, so that a test can look at many retries.)
var (
	pruneRetryMin = 200 * time.Millisecond
	pruneRetryMax = time.Minute
)

const (
	// pruneInterval is how often statedb's reconciler prunes on its own,
	// once the tables are initialized: it catches entries that someone
	// other than the reconciler wrote into the maps.
	pruneInterval = 30 * time.Minute

	// roundSize bounds the frontends reconciled in one round, before
	// their status is written back.
	roundSize = 1000

	// mapFullLogInterval is the least time between two log lines saying
	// that frontends wait for room in a map: while a map stays full,
	// every retry of every waiting frontend finds it so.
	mapFullLogInterval = 30 * time.Second
)

// roundRate and roundBurst limit statedb's reconciler's rounds. A round
// takes every change made since the previous one, so batches form under
// load by themselves; a limit would only make a lone change wait (the
// round that follows the reconciler's own status write-back takes a
// token too).
var (
	roundRate  = rate.Inf
	roundBurst = 1
)

// DefaultConfig is the default reconciler configuration.
var DefaultConfig = Config{
	LBAlgorithm:        "random",
	LBMaxWeightedSlots: 256,
	LBRetryMaxBackoff:  30 * time.Second,
}

// Flags registers the configuration's flags.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("lb-algorithm", def.LBAlgorithm, "Backend selection for services that do not choose one: random or maglev")
	flags.Uint32("lb-maglev-seed", def.LBMaglevSeed, "Seed of Maglev's hashing (the same on every node)")
	flags.Uint32("lb-max-weighted-slots", def.LBMaxWeightedSlots, "Slots a random-algorithm service with unequal weights may use")
	flags.StringToString("lb-zone-ids", def.LBZoneIDs, "Zone IDs for lb_backends, zone=id (1-255),...")
	flags.Duration("lb-retry-max-backoff", def.LBRetryMaxBackoff, "Longest wait before retrying a frontend that failed to reconcile")
}

// settings is Config parsed.
type settings struct {
	defaultAlgorithm uint8
	maglevSeed       uint32
	maxSlots         int
	// zoneIDs are the datapath's IDs of the zones that have one, by
	// lb.Zone: registered (lb.RegisterZone), so that they have handles
	// however many names sources filled lb.ZoneOf's bounded table with.
	zoneIDs map[lb.Zone]uint8
}

func (c Config) settings() (settings, error) {
	s := settings{maglevSeed: c.LBMaglevSeed, maxSlots: int(c.LBMaxWeightedSlots), zoneIDs: map[lb.Zone]uint8{}}
	var alg lb.Algorithm
	if err := alg.UnmarshalText([]byte(c.LBAlgorithm)); err != nil || alg == lb.AlgorithmDefault {
		return s, fmt.Errorf("--lb-algorithm %q: want random or maglev", c.LBAlgorithm)
	}
	s.defaultAlgorithm = algorithmOf(alg)
	if s.maxSlots < 1 {
		return s, fmt.Errorf("--lb-max-weighted-slots: must be at least 1")
	}
	for zone, idStr := range c.LBZoneIDs {
		id, err := strconv.ParseUint(idStr, 10, 8)
		if err != nil || id == 0 {
			return s, fmt.Errorf("--lb-zone-ids: zone %q: ID %q is not a number from 1 to 255", zone, idStr)
		}
		z, err := lb.RegisterZone(zone)
		if err != nil {
			return s, fmt.Errorf("--lb-zone-ids: %w", err)
		}
		s.zoneIDs[z] = uint8(id)
	}
	return s, nil
}

func algorithmOf(a lb.Algorithm) uint8 {
	if a == lb.AlgorithmMaglev {
		return bpf.AlgorithmMaglev
	}
	return bpf.AlgorithmRandom
}

// algorithm returns the datapath algorithm of a service's choice.
func (s settings) algorithm(a lb.Algorithm) uint8 {
	if a == lb.AlgorithmDefault {
		return s.defaultAlgorithm
	}
	return algorithmOf(a)
}
