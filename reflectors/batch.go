package reflectors

import (
	"errors"
	"fmt"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/tables"
)

// Batch is one batch of a source's Writer calls, written in one
// transaction as one Writer.Batch. Each call reports what the Writer says
// about its object with Check: invalid input is rejected (logged and
// counted) and the rest committed; any other error aborts the whole
// transaction, and Write returns it.
type Batch struct {
	src   *Source
	calls []func(statedb.WriteTxn)
	err   error // the first error that is not invalid input
}

// NewBatch returns an empty batch of src's.
func NewBatch(src *Source) *Batch { return &Batch{src: src} }

// Call adds a call to the batch.
func (b *Batch) Call(f func(statedb.WriteTxn)) { b.calls = append(b.calls, f) }

// Check reports a Writer error about one object (from a call).
func (b *Batch) Check(err error, object string) {
	switch {
	case err == nil:
	case errors.Is(err, tables.ErrInvalid):
		b.src.Reject(fmt.Errorf("%s: %w", object, err))
	case b.err == nil:
		b.err = fmt.Errorf("%s: %w", object, err)
	}
}

// Write runs the calls in one write transaction over the Writer's tables
// and extra (a source's own tables), and commits it unless a call failed
// other than by invalid input: then nothing is committed and the error is
// returned.
func (b *Batch) Write(extra ...statedb.TableMeta) error {
	txn := b.src.Writer.WriteTxn(extra...)
	defer txn.Abort()
	err := b.src.Writer.Batch(txn, func() error {
		for _, f := range b.calls {
			f(txn)
		}
		return nil
	})
	if b.err != nil { // the first, not the refresh's (which it may cause)
		err = b.err
	}
	if err != nil {
		return fmt.Errorf("writing a batch of %d changes (aborted): %w", len(b.calls), err)
	}
	txn.Commit()
	return nil
}
