package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the release, set at link time:
//
//	go build -ldflags "-X github.com/kyuhq/kyu/internal/cli.version=v1.2.3" ./cmd/kyu
//
// A binary built by `go install module@version` reports that module
// version instead of "dev".
var version = "dev"

// versionString is "kyu <version> <go version> <os>/<arch>".
func versionString() string {
	v := version
	if v == "dev" {
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("kyu %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// newVersionCommand builds `kyu version`.
func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the kyu version and the Go version it was built with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
