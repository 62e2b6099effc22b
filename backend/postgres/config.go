package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// URL query parameters that Open reads itself and keeps from the server.
const (
	paramSchema      = "schema"
	paramAutoMigrate = "automigrate"
)

// parseConfig reads connString into a pool configuration, taking out the
// parameters that belong to kyu and applying them to opts.
func parseConfig(connString string, opts Options) (*pgxpool.Config, Options, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			// url.Error repeats the whole URL, password included.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, opts, fmt.Errorf("%w: %v", ErrBadURL, err)
		}
		q := u.Query()
		if v := q.Get(paramSchema); v != "" && opts.Schema == "" {
			opts.Schema = v
		}
		if v := q.Get(paramAutoMigrate); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, opts, fmt.Errorf("%w: automigrate=%q is not true or false", ErrBadURL, v)
			}
			opts.AutoMigrate = b
		}
		q.Del(paramSchema)
		q.Del(paramAutoMigrate)
		u.RawQuery = q.Encode()
		connString = u.String()
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// pgx hides the password in its parse errors.
		return nil, opts, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	return cfg, opts, nil
}
