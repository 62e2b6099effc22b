package backendurl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Schemes this package knows.
const (
	schemePebble        = "pebble"
	schemeRedis         = "redis"
	schemeRedisTLS      = "rediss"
	schemeRedisSentinel = "redis-sentinel"
	schemeRedisCluster  = "redis-cluster"
	schemePostgres      = "postgres"
	schemePostgresql    = "postgresql"
	schemeMySQL         = "mysql"
	schemeHTTP          = "http"
	schemeHTTPS         = "https"
	schemeMemory        = "memory"
)

// knownSchemes lists every scheme in the order error messages name them.
var knownSchemes = []string{
	schemePebble,
	schemeRedis, schemeRedisTLS, schemeRedisSentinel, schemeRedisCluster,
	schemePostgres, schemePostgresql,
	schemeMySQL,
	schemeHTTP, schemeHTTPS,
	schemeMemory,
}

func isKnownScheme(s string) bool {
	for _, k := range knownSchemes {
		if s == k {
			return true
		}
	}
	return false
}

// target is a parsed backend URL.
type target struct {
	scheme string
	// dir is the embedded store's directory (scheme pebble only).
	dir string
	// acceptDataLoss is the pebble URL's accept_data_loss=1.
	acceptDataLoss bool
	// url is the parsed URL for the other schemes.
	url *url.URL
}

// parse reads a backend URL. A string without "://" whose prefix before
// the first colon is not a known scheme is a bare path to an embedded store.
func parse(raw string) (target, error) {
	if raw == "" {
		raw = DefaultURL
	}
	if strings.TrimSpace(raw) != raw {
		return target{}, errors.New(`backendurl: the URL has leading or trailing spaces`)
	}
	if !strings.Contains(raw, "://") {
		scheme, _, hasColon := strings.Cut(raw, ":")
		if !hasColon || !isKnownScheme(strings.ToLower(scheme)) {
			return target{scheme: schemePebble, dir: raw}, nil
		}
		return target{}, fmt.Errorf("backendurl: %q: want %s://…", redactOpaque(raw), strings.ToLower(scheme))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the whole URL, password included: keep only
		// the reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return target{}, fmt.Errorf("backendurl: malformed backend URL: %w", err)
	}
	// url.Parse lowercases the scheme.
	if u.Scheme == schemePebble {
		dir, err := pebbleDir(u)
		if err != nil {
			return target{}, err
		}
		accept, err := pebbleAcceptDataLoss(u)
		if err != nil {
			return target{}, err
		}
		return target{scheme: schemePebble, dir: dir, acceptDataLoss: accept}, nil
	}
	if u.Scheme == schemeMemory {
		if u.User != nil || u.Host != "" || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
			return target{}, errors.New("backendurl: memory URL: nothing may follow memory://")
		}
		return target{scheme: schemeMemory}, nil
	}
	if !isKnownScheme(u.Scheme) {
		return target{}, fmt.Errorf("backendurl: unknown backend scheme %q (want one of %s)", u.Scheme, strings.Join(knownSchemes, ", "))
	}
	if (u.Scheme == schemeHTTP || u.Scheme == schemeHTTPS) && u.Host == "" {
		return target{}, fmt.Errorf("backendurl: %s URL: missing host", u.Scheme)
	}
	return target{scheme: u.Scheme, url: u}, nil
}

// pebbleDir reads the directory from pebble:///abs/path or pebble://rel/path.
func pebbleDir(u *url.URL) (string, error) {
	switch {
	case u.User != nil:
		return "", errors.New("backendurl: pebble URL: user information is not allowed")
	case u.Port() != "":
		return "", fmt.Errorf("backendurl: pebble URL %q: a port is not allowed (pebble:///abs/path or pebble://rel/path)", u.String())
	case u.Fragment != "":
		return "", fmt.Errorf("backendurl: pebble URL %q: a fragment is not allowed", u.String())
	}
	// In pebble://rel/path the first element lands in Host.
	dir := u.Host + u.Path
	if dir == "" {
		return "", errors.New("backendurl: pebble URL: missing directory (pebble:///abs/path or pebble://rel/path)")
	}
	return dir, nil
}

// pebbleAcceptDataLoss reads the one parameter a pebble URL takes,
// accept_data_loss=1 (pebble.Options.AcceptDataLoss).
func pebbleAcceptDataLoss(u *url.URL) (bool, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err == nil {
		for k := range q {
			if k != "accept_data_loss" {
				err = errors.New("unknown parameters")
			}
		}
	}
	if err != nil {
		return false, fmt.Errorf("backendurl: pebble URL %q: unknown parameters %q (the one parameter is accept_data_loss=1)", u.String(), u.RawQuery)
	}
	switch v := q.Get("accept_data_loss"); v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fmt.Errorf("backendurl: pebble URL: accept_data_loss=%q: want 1 or 0", v)
	}
}

// redactOpaque hides a password in a string that did not parse as a URL
// with an authority, such as "redis:user:secret@host".
func redactOpaque(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		scheme, _, _ := strings.Cut(s, ":")
		return scheme + ":…" + s[i:]
	}
	return s
}
