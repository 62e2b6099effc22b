package backendurl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu/backend/backendtest"
	"github.com/kyuhq/kyu/backend/memory"
	"github.com/kyuhq/kyu/backend/redis"
	"github.com/kyuhq/kyu/backend/remote"
)

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		scheme  string
		dir     string
		accept  bool   // acceptDataLoss
		wantErr string // substring; empty means success
	}{
		{raw: "", scheme: "pebble", dir: "kyu-data"},
		{raw: "pebble:///var/lib/kyu", scheme: "pebble", dir: "/var/lib/kyu"},
		{raw: "pebble://kyu-data", scheme: "pebble", dir: "kyu-data"},
		{raw: "pebble://rel/path/x", scheme: "pebble", dir: "rel/path/x"},
		{raw: "pebble://./data", scheme: "pebble", dir: "./data"},
		{raw: "PEBBLE:///abs", scheme: "pebble", dir: "/abs"},
		{raw: "pebble:///with%20space", scheme: "pebble", dir: "/with space"},
		{raw: "pebble:///abs?accept_data_loss=1", scheme: "pebble", dir: "/abs", accept: true},
		{raw: "pebble://rel?accept_data_loss=0", scheme: "pebble", dir: "rel"},
		{raw: "/var/lib/kyu", scheme: "pebble", dir: "/var/lib/kyu"},
		{raw: "./data", scheme: "pebble", dir: "./data"},
		{raw: "data dir", scheme: "pebble", dir: "data dir"},
		{raw: "weird:name", scheme: "pebble", dir: "weird:name"},
		{raw: "redis://localhost:6379/0", scheme: "redis"},
		{raw: "rediss://:secret@cache:6380", scheme: "rediss"},
		{raw: "redis-sentinel://h1:26379,h2:26379/mymaster", scheme: "redis-sentinel"},
		{raw: "redis-cluster://h1:7000", scheme: "redis-cluster"},
		{raw: "postgres://u:p@db/kyu?sslmode=disable", scheme: "postgres"},
		{raw: "postgresql:///kyu?host=/var/run/postgresql", scheme: "postgresql"},
		{raw: "mysql://u:p@db:3306/kyu", scheme: "mysql"},
		{raw: "http://kyu:7420", scheme: "http"},
		{raw: "https://kyu.example.com", scheme: "https"},
		{raw: "memory://", scheme: "memory"},
		{raw: "MEMORY://", scheme: "memory"},

		{raw: "pebble://", wantErr: "missing directory"},
		{raw: "pebble://u:secret@dir", wantErr: "user information"},
		{raw: "pebble://host:99/dir", wantErr: "port is not allowed"},
		{raw: "pebble:///dir?sync=0", wantErr: "unknown parameters"},
		{raw: "pebble:///dir?accept_data_loss=1&sync=0", wantErr: "unknown parameters"},
		{raw: "pebble:///dir?accept_data_loss=yes", wantErr: "want 1 or 0"},
		{raw: "pebble:///dir#frag", wantErr: "fragment"},
		{raw: "ftp://host/x", wantErr: `unknown backend scheme "ftp"`},
		{raw: "://nothing", wantErr: "malformed backend URL"},
		{raw: "redis://h:notaport", wantErr: "malformed backend URL"},
		{raw: "redis://[::1", wantErr: "malformed backend URL"},
		{raw: "http://", wantErr: "missing host"},
		{raw: "redis:localhost", wantErr: "want redis://"},
		{raw: " pebble:///x", wantErr: "spaces"},
		{raw: "memory://x", wantErr: "nothing may follow"},
		{raw: "memory:///x", wantErr: "nothing may follow"},
		{raw: "memory://?a=1", wantErr: "nothing may follow"},
		{raw: "memory:", wantErr: "want memory://"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			got, err := parse(tt.raw)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("parse(%q) = %+v, want error containing %q", tt.raw, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse(%q) error = %q, want it to contain %q", tt.raw, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.raw, err)
			}
			if got.scheme != tt.scheme || got.dir != tt.dir || got.acceptDataLoss != tt.accept {
				t.Fatalf("parse(%q) = scheme %q dir %q accept %v, want %q %q %v", tt.raw, got.scheme, got.dir, got.acceptDataLoss, tt.scheme, tt.dir, tt.accept)
			}
		})
	}
}

func TestErrorsHidePasswords(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"redis://:hunter2@h:notaport",
		"redis:user:hunter2@host",
		"http://u:hunter2@",
		"pebble://u:hunter2@dir",
		"ftp://u:hunter2@host",
		"postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2",
		"postgres://u:hunter2@[::1",
		"mysql://u:hunter2@127.0.0.1:1/db?timeout=2s",
		"mysql://u:hunter2@[::1",
	} {
		_, err := Open(t.Context(), raw, Options{})
		if err == nil {
			t.Fatalf("Open(%q) succeeded, want an error", raw)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error repeats the password: %v", raw, err)
		}
	}
}

func TestOpenRemote(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"http://h:7420", "https://kyu.example.com", "http://:token@h:7420/prefix"} {
		b, err := Open(t.Context(), raw, Options{Token: "t"})
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		if _, ok := b.(*remote.Backend); !ok {
			t.Fatalf("Open(%q) = %T, want *remote.Backend", raw, b)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Open(%q): Close: %v", raw, err)
		}
	}
}

func TestOpenPebble(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, raw := range []string{
		"pebble://" + filepath.Join(dir, "a"),
		filepath.Join(dir, "b"),
	} {
		b, err := Open(t.Context(), raw, Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("case %d: Close: %v", i, err)
		}
	}
}

func TestOpenMemory(t *testing.T) {
	t.Parallel()
	a, err := Open(t.Context(), "memory://", Options{})
	if err != nil {
		t.Fatalf("Open(memory://): %v", err)
	}
	defer a.Close()
	if _, ok := a.(*memory.Store); !ok {
		t.Fatalf("Open(memory://) = %T, want *memory.Store", a)
	}
	b, err := Open(t.Context(), "memory://", Options{})
	if err != nil {
		t.Fatalf("Open(memory://): %v", err)
	}
	defer b.Close()
	if a == b {
		t.Fatal("two Opens of memory:// returned the same store; want a new one each")
	}
}

func TestOpenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Open(ctx, filepath.Join(t.TempDir(), "x"), Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestOpenRedisBadURL(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"redis://:hunter2@127.0.0.1:6379/zero",
		"redis://:hunter2@127.0.0.1:6379/0?prefix=no%20spaces",
		"redis-sentinel://:hunter2@127.0.0.1:26379",
		"redis://:hunter2@127.0.0.1:6379/0?colour=blue",
	} {
		b, err := Open(t.Context(), raw, Options{})
		if err == nil {
			b.Close()
			t.Fatalf("Open(%q) succeeded, want an error", raw)
		}
		if !errors.Is(err, redis.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want redis.ErrBadURL", raw, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) error repeats the password: %v", raw, err)
		}
	}
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	url := backendtest.ServiceURL("KYU_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		backendtest.Unreachable(t, "postgres", "KYU_TEST_POSTGRES_URL", url, err)
	}
	defer conn.Close(context.Background())
	schema := fmt.Sprintf("kyu_test_backendurl_%d", time.Now().UnixNano())
	defer conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	b, err := Open(t.Context(), url+sep+"schema="+schema, Options{})
	if err != nil {
		t.Fatalf("Open(postgres URL): %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
