// Package tables holds the load-balancing state in StateDB tables:
// services (every source's declaration of each service), frontends (the
// addresses the datapath matches, each with its selected backends) and
// backends (one row per backend address, with one instance per service and
// source), plus the local node that selection reads.
//
// A Writer is the only way to change them. Sources declare services and
// backends; the Writer derives the frontends on every change: which
// service owns each address, and which backends each frontend uses
// (SelectBackends). A source applying many changes at once wraps them in
// Writer.Batch, so that the frontends are derived once. Readers take
// snapshots without locks and watch for changes, as with any StateDB
// table.
//
// The Writer's errors are of two kinds (see Writer): invalid input
// (errors.Is(err, ErrInvalid); an *InvalidError names the object and
// field), after which the transaction is still good, and anything else,
// after which it must be aborted.
//
// History is the journal of frontend changes (lbctl history): a source
// says what object it applies with SetCause on its transaction, and the
// Writer stages one entry per frontend row it changes, published when
// the transaction commits and dropped when it aborts; bounded by
// --history-max-bytes (HistoryConfig).
//
// Deleted rows stay reachable a while: StateDB keeps them for its change
// iterators until every one has seen them, and then, in the transaction
// it keeps for reuse, until the next write. Cell releases the latter a
// few seconds after changes (Writer.ReleaseDeleted), so that memory comes
// back after a delete-all; an agent built with New calls it itself.
//
// ScriptCommands exports lb/* commands for script tests (txtar), to use
// beside statedb's db/* commands (lb/history prints the journal).
package tables
