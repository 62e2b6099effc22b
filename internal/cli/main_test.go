package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/kyuhq/kyu/daemon"
)

// asKyuEnv makes the test binary run as the kyu binary, so that tests can
// start kyu commands as processes of their own (kyu worker under
// signals, killed with SIGKILL) without building it.
const asKyuEnv = "KYU_TEST_AS_KYU"

func TestMain(m *testing.M) {
	// kyu worker, run in-process or as a process, starts this binary as
	// its guardian.
	daemon.ServeGuardianIfAsked()
	if os.Getenv(asKyuEnv) == "1" {
		os.Exit(runAsKyu())
	}
	os.Exit(m.Run())
}

// runAsKyu is cmd/kyu's main.
func runAsKyu() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	err := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, Message(err))
	}
	return ExitCode(err)
}
