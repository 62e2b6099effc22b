package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/server"
)

// backendEnv names the environment variable that gives the operator
// commands their store when --backend is not given.
const backendEnv = "KYU_BACKEND"

// defaultOperatorURL is the store of the operator commands when neither
// --backend nor KYU_BACKEND names one: the default `kyu server`.
const defaultOperatorURL = "http://" + server.DefaultAddr

// storeFlags are the flags every operator command shares: the store and
// the output format.
type storeFlags struct {
	backendURL string
	output     string
}

// add registers --backend and -o on cmd.
func (f *storeFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.backendURL, "backend", "", "store as a URL (default $"+backendEnv+", else "+defaultOperatorURL+", the default kyu server)")
	fl.StringVarP(&f.output, "output", "o", outputTable, "output format: table or json")
}

// resolveBackend returns the store's URL: flag, else env, else the default
// server's.
func resolveBackend(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if env := getenv(backendEnv); env != "" {
		return env
	}
	return defaultOperatorURL
}

// open checks the output format and opens a client over the store;
// closeStore closes the store.
func (f *storeFlags) open(ctx context.Context) (c *kyu.Client, format string, closeStore func() error, err error) {
	format, err = checkOutput(f.output)
	if err != nil {
		return nil, "", nil, err
	}
	raw := resolveBackend(f.backendURL, os.Getenv)
	b, err := backendurl.Open(ctx, raw, backendurl.Options{Token: os.Getenv(tokenEnv)})
	if errors.Is(err, pebble.ErrLocked) {
		return nil, "", nil, fmt.Errorf("%w\n(a kyu server holds this store: use its URL instead, e.g. --backend %s)", err, defaultOperatorURL)
	}
	if err != nil {
		return nil, "", nil, err
	}
	return kyu.NewClient(b, kyu.ClientConfig{}), format, b.Close, nil
}

// withClient opens the store of f, runs fn with a client and closes the
// store, joining its close error.
func withClient(ctx context.Context, f *storeFlags, fn func(c *kyu.Client, format string) error) (err error) {
	c, format, closeStore, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeStore(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()
	err = fn(c, format)
	if errors.Is(err, syscall.ECONNREFUSED) {
		err = fmt.Errorf("%w\n(no kyu server answers at %s: start one with kyu server, or name the store with --backend or $%s)",
			err, resolveBackend(f.backendURL, os.Getenv), backendEnv)
	}
	return err
}
