package tables

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is the kind of every error for invalid input: test with
// errors.Is(err, ErrInvalid). Any other error of the Writer means the
// transaction must be aborted (see Writer).
var ErrInvalid = errors.New("invalid input")

// InvalidError is invalid input: which object, which field of it, and
// what is wrong. It is ErrInvalid (errors.Is) and unwraps to Err.
type InvalidError struct {
	// Object names the object ("service default/web"); empty when Err
	// names it already.
	Object string
	// Field names the field (`port "http"`); empty when Err names it or
	// the object as a whole is wrong.
	Field string
	// Err is what is wrong (`unknown protocol "TPC"`).
	Err error
}

// Error reads "service default/web: port "http": unknown protocol "TPC"".
func (e *InvalidError) Error() string {
	parts := make([]string, 0, 3)
	for _, p := range []string{e.Object, e.Field} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if e.Err != nil {
		parts = append(parts, e.Err.Error())
	}
	return strings.Join(parts, ": ")
}

// Unwrap returns the reason, so that errors.Is and errors.As look into it.
func (e *InvalidError) Unwrap() error { return e.Err }

// Is makes every InvalidError match ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Invalidf returns invalid input of object's field (either may be empty),
// with the reason formatted as by fmt.Errorf.
func Invalidf(object, field, format string, args ...any) error {
	return &InvalidError{Object: object, Field: field, Err: fmt.Errorf(format, args...)}
}

// AsInvalid marks err, which already names the object and field (a
// source's own decoding or validation), as invalid input. nil stays nil,
// and invalid input stays as it is.
func AsInvalid(err error) error {
	if err == nil || errors.Is(err, ErrInvalid) {
		return err
	}
	return &InvalidError{Err: err}
}
