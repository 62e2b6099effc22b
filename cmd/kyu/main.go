// Command kyu is the kyu binary. The commands live in internal/cli; main
// only wires them to the process: arguments, signals and the exit code.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kyuhq/kyu/daemon"
	"github.com/kyuhq/kyu/internal/cli"
)

func main() {
	// kyu worker starts this binary again as its guardian process.
	daemon.ServeGuardianIfAsked()
	os.Exit(run())
}

// run returns the exit code, so that deferred calls run before os.Exit.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default behaviour so that a
	// second one ends a shutdown that hangs.
	context.AfterFunc(ctx, stop)

	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, cli.Message(err))
	}
	return cli.ExitCode(err)
}
