package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Message is the line to print for an error returned by Run: prefixed
// with "kyu: " once, whether or not the error's own text starts with it.
func Message(err error) string {
	return "kyu: " + strings.TrimPrefix(err.Error(), "kyu: ")
}

// flagError words a flag that could not be parsed for a person: the flag,
// the value and what it must be, not the parser's Go error.
func flagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	name := "--" + ive.GetFlag().Name
	return fmt.Errorf("invalid value %q for %s: %s", ive.GetValue(), name, flagReason(ive.GetFlag().Value.Type(), ive.Unwrap()))
}

// flagReason says what a value of a flag of type typ must be.
func flagReason(typ string, cause error) string {
	var ne *strconv.NumError
	if errors.As(cause, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
		return "out of range"
	}
	switch typ {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count":
		return "must be an integer"
	case "float32", "float64":
		return "must be a number"
	case "bool":
		return "must be true or false"
	case "duration":
		return "must be a duration such as 500ms, 30s or 5m"
	}
	return strings.TrimPrefix(cause.Error(), "strconv.ParseInt: ")
}
