package redis

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ParseURL reads a Redis store URL into Options:
//
//	redis://[user:password@]host[:port][/db][?prefix=P]
//	rediss://…                       the same over TLS
//	redis-cluster://[user:password@]host:port[,host:port…][?prefix=P]
//	redis-sentinel://[user:password@]host:port[,host:port…][/db]?master=NAME[&prefix=P]
//
// More addresses may also be given as addr=host:port parameters. The port
// defaults to 6379 (26379 for sentinels). Errors never repeat the password.
func ParseURL(raw string) (Options, error) {
	var o Options
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return o, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	defPort := "6379"
	switch u.Scheme {
	case "redis":
	case "rediss":
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	case "redis-cluster":
		o.Cluster = true
	case "redis-sentinel":
		defPort = "26379"
	default:
		return o, fmt.Errorf("%w: scheme %q (want redis, rediss, redis-cluster or redis-sentinel)", ErrBadURL, u.Scheme)
	}
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
		if _, hasPw := u.User.Password(); !hasPw {
			// redis://secret@host: the lone user part is the password.
			o.Username, o.Password = "", u.User.Username()
		}
	}
	q := u.Query()
	hosts := strings.Split(u.Host, ",")
	hosts = append(hosts, q["addr"]...)
	for _, h := range hosts {
		if h == "" {
			continue
		}
		addr, err := withPort(h, defPort)
		if err != nil {
			return o, err
		}
		o.Addrs = append(o.Addrs, addr)
	}
	if len(o.Addrs) == 0 {
		return o, fmt.Errorf("%w: missing host", ErrBadURL)
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return o, fmt.Errorf("%w: database %q is not a number", ErrBadURL, p)
		}
		if o.Cluster && db != 0 {
			return o, fmt.Errorf("%w: Redis Cluster has only database 0", ErrBadURL)
		}
		o.DB = db
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "addr":
		case "prefix":
			if !validPrefix(v) {
				return o, fmt.Errorf("%w: prefix %q is not 1-64 characters of [A-Za-z0-9._-]", ErrBadURL, v)
			}
			o.Prefix = v
		case "master":
			o.SentinelMaster = v
		case "skip_verify":
			if o.TLS == nil {
				return o, fmt.Errorf("%w: skip_verify needs rediss://", ErrBadURL)
			}
			o.TLS.InsecureSkipVerify = v == "" || v == "true" || v == "1"
		default:
			return o, fmt.Errorf("%w: unknown parameter %q (known: prefix, addr, master, skip_verify)", ErrBadURL, k)
		}
	}
	if u.Scheme == "redis-sentinel" && o.SentinelMaster == "" {
		return o, fmt.Errorf("%w: redis-sentinel needs ?master=NAME", ErrBadURL)
	}
	if o.TLS != nil {
		o.TLS.ServerName, _, _ = net.SplitHostPort(o.Addrs[0])
	}
	return o, nil
}

// withPort adds the default port to a host without one.
func withPort(h, port string) (string, error) {
	if _, p, err := net.SplitHostPort(h); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: port %q", ErrBadURL, p)
		}
		return h, nil
	}
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		return "", fmt.Errorf("%w: address %q", ErrBadURL, h)
	}
	return net.JoinHostPort(strings.Trim(h, "[]"), port), nil
}
