package tables

import "github.com/spf13/pflag"

// HistoryConfig bounds the journal of frontend changes (hive flags).
type HistoryConfig struct {
	// HistoryMaxBytes caps the journal's memory (estimated); the oldest
	// entries leave first. 0 turns it off.
	HistoryMaxBytes int
}

// DefaultHistoryConfig keeps DefaultHistoryMaxBytes.
var DefaultHistoryConfig = HistoryConfig{HistoryMaxBytes: DefaultHistoryMaxBytes}

// Flags registers the configuration's flags.
func (def HistoryConfig) Flags(flags *pflag.FlagSet) {
	flags.Int("history-max-bytes", def.HistoryMaxBytes, "Memory cap of the journal of frontend changes (lbctl history), oldest out first; 0 turns it off")
}
