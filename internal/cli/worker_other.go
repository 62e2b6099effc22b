//go:build !unix

package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newWorkerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run jobs as child processes (Unix only)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("kyu worker runs on Unix systems only")
		},
	}
}
