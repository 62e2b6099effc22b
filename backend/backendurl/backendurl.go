// Package backendurl opens a backend.Backend from a URL, the one way kyu
// names a store everywhere (library, CLI, configuration):
//
//	pebble:///var/lib/kyu    embedded store in an absolute directory
//	pebble://kyu-data        embedded store in a relative directory
//	pebble:///var/lib/kyu?accept_data_loss=1
//	                         open it even though acknowledged data is
//	                         missing (pebble.Options.AcceptDataLoss)
//	/var/lib/kyu, ./data     a bare path: the embedded store there
//	""                       the default, pebble://kyu-data
//
//	redis://[user:password@]host:6379/0?prefix=kyu
//	rediss://…, redis-cluster://host:port,host:port, redis-sentinel://host:26379?master=NAME
//	                         Redis (see backend/redis.ParseURL)
//	http://host:7420         a kyu server (backend/remote); https too
//	postgres://user@host/db?schema=kyu     PostgreSQL (postgresql:// too)
//	mysql://user:password@host:3306/db?prefix=kyu_
//	                         MySQL 8 or MariaDB 10.6+ (backend/mysql)
//	memory://                an empty in-memory store (backend/memory), for
//	                         tests and demos: nothing persists, each Open
//	                         makes a new one
//
// A PostgreSQL URL takes the store's schema as the schema parameter
// (default kyu) and migrates it when the store opens unless it says
// automigrate=false (then run `kyu migrate` first).
//
// A MySQL URL takes the prefix of the store's tables as the prefix
// parameter (default kyu_) and migrates them when the store opens unless
// it says automigrate=false (then run `kyu migrate` first); socket=PATH
// reaches the server over a Unix socket, and the driver's own parameters
// (tls, timeout, …) pass through.
//
// The choice is a plain switch on the scheme, with no global registry: a
// program that wants only one store imports that store's package directly
// and never links the others.
package backendurl

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kyuhq/kyu/backend"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/backend/mysql"
	"github.com/kyuhq/kyu/backend/pebble"
	"github.com/kyuhq/kyu/backend/postgres"
	"github.com/kyuhq/kyu/backend/redis"
	"github.com/kyuhq/kyu/backend/remote"
)

// DefaultURL is the store used when no URL is given.
const DefaultURL = "pebble://kyu-data"

// Options tune how the backend is opened.
type Options struct {
	// Logger receives the backend's logs; nil discards them.
	Logger *slog.Logger
	// Token is the bearer token for a kyu server (http, https); a
	// password in the URL (http://:token@host:7420) serves when it is empty.
	Token string
}

// Open opens the backend named by rawURL; see the package doc for the forms.
// Errors never repeat a URL's password.
func Open(ctx context.Context, rawURL string, opts Options) (backend.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t, err := parse(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch t.scheme {
	case schemePebble:
		opts.Logger.Debug("opening embedded store", "dir", t.dir)
		b, err := pebble.Open(t.dir, pebble.Options{Logger: opts.Logger, AcceptDataLoss: t.acceptDataLoss})
		if err != nil {
			return nil, fmt.Errorf("backendurl: open embedded store %q: %w", t.dir, err)
		}
		return b, nil
	case schemeRedis, schemeRedisTLS, schemeRedisSentinel, schemeRedisCluster:
		opts.Logger.Debug("opening redis store", "url", t.url.Redacted())
		b, err := redis.OpenURL(ctx, t.url.String(), redis.Options{Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("backendurl: open redis store %s: %w", t.url.Redacted(), err)
		}
		return b, nil
	case schemePostgres, schemePostgresql:
		opts.Logger.Debug("opening PostgreSQL store", "url", t.url.Redacted())
		b, err := postgres.Open(ctx, t.url.String(), postgres.Options{Logger: opts.Logger, AutoMigrate: true})
		if err != nil {
			return nil, fmt.Errorf("backendurl: open PostgreSQL store %s: %w", t.url.Redacted(), err)
		}
		return b, nil
	case schemeMySQL:
		opts.Logger.Debug("opening MySQL store", "url", t.url.Redacted())
		b, err := mysql.Open(ctx, t.url.String(), mysql.Options{Logger: opts.Logger, AutoMigrate: true})
		if err != nil {
			return nil, fmt.Errorf("backendurl: open MySQL store %s: %w", t.url.Redacted(), err)
		}
		return b, nil
	case schemeHTTP, schemeHTTPS:
		b, err := remote.Open(t.url.String(), remote.Options{Token: opts.Token, Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("backendurl: %w", err)
		}
		return b, nil
	case schemeMemory:
		opts.Logger.Debug("opening in-memory store: nothing persists")
		return memory.New(), nil
	default:
		return nil, fmt.Errorf("backendurl: %w", &UnavailableError{Scheme: t.scheme})
	}
}

// UnavailableError reports a recognised scheme whose backend this build
// does not include.
type UnavailableError struct {
	Scheme string
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backend %q is not available in this build yet", e.Scheme)
}

// EmbeddedDir returns the directory of the embedded store that rawURL
// names, as given (it may be relative), and false when rawURL names
// another store or does not parse.
func EmbeddedDir(rawURL string) (string, bool) {
	t, err := parse(rawURL)
	if err != nil || t.scheme != schemePebble {
		return "", false
	}
	return t.dir, true
}
