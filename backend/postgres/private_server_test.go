package postgres

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kyuhq/kyu"
)

// privateServer is a PostgreSQL server a test creates for itself, so it
// can stop and start it without disturbing anyone.
type privateServer struct {
	t    *testing.T
	bin  string // the directory of initdb and pg_ctl
	dir  string // owned by postgres: data, socket and log
	port int
}

// startPrivateServer creates and starts a private server, or skips the
// test when this machine cannot (no PostgreSQL binaries, not root, no
// postgres user). Cleanup stops it and removes its directory.
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL server binaries under /usr/lib/postgresql")
	}
	if os.Geteuid() != 0 {
		t.Skip("a private server needs root, to run initdb as the postgres user")
	}
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user: %v", err)
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		t.Skip("no runuser")
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	dir, err := os.MkdirTemp("", "kyu-pg-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &privateServer{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: dir, port: port}
	p.run("initdb", "-D", p.data(), "-A", "trust", "-U", "postgres", "--no-sync")
	p.start()
	t.Cleanup(func() { p.ctl("stop", "-m", "immediate") })
	return p
}

func (p *privateServer) data() string { return filepath.Join(p.dir, "data") }

// url names the private server's postgres database.
func (p *privateServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// run runs one of the server's programs as the postgres user.
func (p *privateServer) run(name string, args ...string) {
	p.t.Helper()
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, name)}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
		p.t.Fatalf("%s %v: %v\n%s\nserver log:\n%s", name, args, err, out, log)
	}
}

// ctl runs pg_ctl on the private server.
func (p *privateServer) ctl(args ...string) {
	p.t.Helper()
	p.run("pg_ctl", append([]string{"-D", p.data(), "-l", filepath.Join(p.dir, "log"), "-w", "-t", "60"}, args...)...)
}

// start starts the server and waits until it accepts connections.
func (p *privateServer) start() {
	p.t.Helper()
	p.ctl("start", "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=50", p.port, p.dir))
}

// TestFaultServerRestart crashes (stop -m immediate) and restarts a
// private server while a worker processes jobs: no job is lost and none
// runs twice at once.
func TestFaultServerRestart(t *testing.T) {
	t.Parallel()
	srv := startPrivateServer(t)
	s, err := Open(t.Context(), srv.url(), Options{AutoMigrate: true, MaxConns: 6, ListenRetry: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	const queue, jobs = "restart", 1500
	ids := enqueueFaultJobs(t, s, queue, jobs)

	tracker := newExecTracker()
	w, err := kyu.NewWorker(s, kyu.WorkerConfig{
		Queues:              map[string]int{queue: 20},
		Handler:             tracker.handler(2 * time.Millisecond),
		Lease:               3 * time.Second,
		PollInterval:        100 * time.Millisecond,
		MaintenanceInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Shutdown(context.Background()) })

	// Each count connects anew: the server goes away in between.
	count := func(ctx context.Context) (int, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, srv.url())
		if err != nil {
			return 0, err
		}
		defer conn.Close(context.Background())
		var n int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM `+s.schema+`.jobs WHERE state = 'completed'`).Scan(&n)
		return n, err
	}
	for round := range 2 {
		target := jobs * (round + 1) / 3
		waitCompleted(t, func(ctx context.Context) (int, error) {
			n, err := count(ctx)
			return min(n, target), err
		}, target, 60*time.Second)
		srv.ctl("stop", "-m", "immediate")
		srv.start()
	}
	waitCompleted(t, count, jobs, 90*time.Second)
	tracker.check(t, ids)
}
