package mysql

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// URL query parameters that Open reads itself and keeps from the driver.
const (
	paramPrefix      = "prefix"
	paramAutoMigrate = "automigrate"
	paramSocket      = "socket"
)

// parseURL reads a mysql:// URL into a driver configuration, taking out
// the parameters that belong to kyu and applying them to opts:
//
//	mysql://user:password@host:3306/database?prefix=kyu_&automigrate=true
//	mysql://user@/database?socket=/run/mysqld/mysqld.sock
//
// Other parameters go to the driver (github.com/go-sql-driver/mysql), as
// in its DSNs: tls=true|skip-verify|preferred, timeout=5s and the like.
// Errors never repeat the password.
func parseURL(raw string, opts Options) (*mysql.Config, Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, opts, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	if u.Scheme != "mysql" {
		return nil, opts, fmt.Errorf("%w: scheme %q, want mysql://", ErrBadURL, u.Scheme)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, opts, fmt.Errorf("%w: %s: want mysql://user:password@host:3306/database", ErrBadURL, u.Redacted())
	}
	q := u.Query()
	if v := q.Get(paramPrefix); v != "" && opts.Prefix == "" {
		opts.Prefix = v
	}
	if v := q.Get(paramAutoMigrate); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, opts, fmt.Errorf("%w: automigrate=%q is not true or false", ErrBadURL, v)
		}
		opts.AutoMigrate = b
	}
	socket := q.Get(paramSocket)
	q.Del(paramPrefix)
	q.Del(paramAutoMigrate)
	q.Del(paramSocket)
	// The driver reads its own parameters from a DSN; the address and the
	// credentials are set below, so no password passes through a string
	// the driver might quote in an error.
	cfg, err := mysql.ParseDSN("/?" + q.Encode())
	if err != nil {
		return nil, opts, fmt.Errorf("%w: %s: %v", ErrBadURL, u.Redacted(), err)
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	switch {
	case socket != "":
		if u.Host != "" {
			return nil, opts, fmt.Errorf("%w: %s: give a host or a socket, not both", ErrBadURL, u.Redacted())
		}
		cfg.Net, cfg.Addr = "unix", socket
	default:
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "3306"
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, opts, fmt.Errorf("%w: %s: port %q is not a number", ErrBadURL, u.Redacted(), port)
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	}
	cfg.DBName = db
	return cfg, opts, nil
}
