package queueing

import "errors"

// InputError marks an error caused by the evaluation's inputs (workload, engine or
// timing): callers map it to a user error. Other errors are internal.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// IsInputError reports whether err is (or wraps) an InputError.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// inputErr wraps a non-nil err as an InputError.
func inputErr(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}
