package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
)

// withQuery returns rawURL with the query parameter key set to value.
func withQuery(rawURL, key, value string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("parse %q: %w", rawURL, err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// dropRedisKeys deletes every key matching pattern in the database that
// redisURL names.
func dropRedisKeys(ctx context.Context, redisURL, pattern string) error {
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for it.Next(ctx) {
		batch = append(batch, it.Val())
		if len(batch) == 1000 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return rdb.Unlink(ctx, batch...).Err()
	}
	return nil
}

// dropSchema drops schema and everything in it, and creates it empty.
func dropSchema(ctx context.Context, pgURL, schema string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+id+" CASCADE"); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+id)
	return err
}

// pingRedis checks that Redis answers at redisURL.
func pingRedis(ctx context.Context, redisURL string) error {
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	rdb := goredis.NewClient(opt)
	defer rdb.Close()
	return rdb.Ping(ctx).Err()
}

// pingPostgres checks that PostgreSQL answers at pgURL.
func pingPostgres(ctx context.Context, pgURL string) error {
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}
