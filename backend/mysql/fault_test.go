package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// faultLoad runs n jobs of queue "f" through s with claimers that check
// the lease protocol while fault does its damage: every job ends
// completed (none lost), and no claim hands out a job that another live
// lease holds, or a lease token that is not greater than every earlier
// one of the job.
func faultLoad(t *testing.T, s *Store, n int, fault func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	jobs := make([]backend.NewJob, n)
	for i := range jobs {
		jobs[i] = backend.NewJob{Type: "t", Queue: "f", Payload: []byte(fmt.Sprint(i))}
	}
	if _, err := s.Enqueue(ctx, backend.EnqueueParams{Jobs: jobs, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	type lease struct {
		token   int64
		expires time.Time
	}
	var mu sync.Mutex
	holders := map[string]lease{}
	tokens := map[string]int64{}
	var violations []string
	const leaseFor = 2 * time.Second
	work := func() {
		for ctx.Err() == nil {
			now := time.Now()
			c, err := s.Claim(ctx, backend.ClaimParams{Queues: []string{"f"}, Max: 5, Lease: leaseFor, WorkerID: "fault", Now: now})
			if err != nil || len(c.Jobs) == 0 {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			// A job comes back only through RecoverLeases with a Now at or
			// past its lease's end, read before this Claim returned; the
			// claim's own Now may be older than that under load. So a
			// second lease is a violation only if this Claim returned
			// before the first lease ended.
			returned := time.Now()
			items := make([]backend.CompleteItem, len(c.Jobs))
			mu.Lock()
			for i, j := range c.Jobs {
				if h, ok := holders[j.ID]; ok && returned.Before(h.expires) && h.token != j.LeaseToken {
					violations = append(violations, fmt.Sprintf("job %s claimed with token %d while token %d is live until %v", j.ID, j.LeaseToken, h.token, h.expires))
				}
				if j.LeaseToken <= tokens[j.ID] {
					violations = append(violations, fmt.Sprintf("job %s claimed with token %d after token %d", j.ID, j.LeaseToken, tokens[j.ID]))
				}
				tokens[j.ID] = j.LeaseToken
				holders[j.ID] = lease{j.LeaseToken, j.LeaseExpiresAt}
				items[i] = backend.CompleteItem{Lease: backend.Lease{JobID: j.ID, Token: j.LeaseToken}}
			}
			mu.Unlock()
			res, err := s.Complete(ctx, backend.CompleteParams{Items: items, Now: time.Now()})
			if err != nil {
				continue // unknown outcome: the lease expires or the job is done
			}
			mu.Lock()
			for i, it := range items {
				if res.Errors[i] == nil {
					delete(holders, it.Lease.JobID)
				}
			}
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); work() }()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			s.RecoverLeases(ctx, backend.MaintenanceParams{Now: time.Now()})
			time.Sleep(100 * time.Millisecond)
		}
	}()
	go func() { defer wg.Done(); fault(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	for {
		st, err := s.Stats(ctx, backend.StatsParams{Now: time.Now()})
		if err == nil {
			var done int64
			for _, q := range st.Queues {
				done += q.Counts[backend.StateCompleted]
			}
			if done == int64(n) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("after 120s %d of %d jobs are completed: %+v", done, n, st.Queues)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
}

// TestFaultKilledConnections: the server kills every connection of the
// store (KILL by id, only this test's: they log in as a user of their
// own) again and again while jobs run: no job is lost, none is held by
// two live leases.
func TestFaultKilledConnections(t *testing.T) {
	t.Parallel()
	url := testURL(t)
	root, err := openRaw(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	cfg, _, err := parseURL(url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	user, pass := "kyuf_"+hex.EncodeToString(b), hex.EncodeToString(b)+"Pw"
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pass),
		fmt.Sprintf("CREATE USER '%s'@'localhost' IDENTIFIED BY '%s'", user, pass),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", cfg.DBName, user),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'localhost'", cfg.DBName, user),
	} {
		if _, err := root.ExecContext(t.Context(), q); err != nil {
			t.Skipf("cannot make a user of the test's own (%v)", err)
		}
	}
	// Registered before the store's cleanup, so it runs after it.
	t.Cleanup(func() {
		root.ExecContext(context.Background(), fmt.Sprintf("DROP USER '%s'@'%%', '%s'@'localhost'", user, user))
	})
	host := cfg.Addr
	if cfg.Net == "unix" {
		host = "/?socket=" + cfg.Addr
	}
	own := fmt.Sprintf("mysql://%s:%s@%s/%s", user, pass, host, cfg.DBName)
	s := openTestStoreAt(t, own, Options{MaxConns: 6})
	killed := 0
	faultLoad(t, s, 300, func(ctx context.Context) {
		for i := 0; i < 40 && ctx.Err() == nil; i++ {
			rows, err := root.QueryContext(ctx, `SELECT id FROM information_schema.processlist WHERE user = ?`, user)
			if err != nil {
				return
			}
			var ids []int64
			for rows.Next() {
				var id int64
				rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			for _, id := range ids {
				if _, err := root.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
					killed++
				}
			}
			time.Sleep(30 * time.Millisecond)
		}
	})
	if killed == 0 {
		t.Fatal("no connection of the store was killed")
	}
	t.Logf("killed %d connections", killed)
}

// openTestStoreAt is openTestStore on the given URL.
func openTestStoreAt(t *testing.T, url string, opts Options) *Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = testPrefix(t)
	}
	opts.AutoMigrate = true
	s, err := Open(t.Context(), url, opts)
	if err != nil {
		dropTables(t, url, opts.Prefix)
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		dropTables(t, url, opts.Prefix)
	})
	return s
}

// privateServer is a MariaDB server a test creates in a directory of its
// own, on a free port and a socket of its own, so that it can crash and
// restart it without disturbing anyone.
type privateServer struct {
	t    *testing.T
	dir  string
	port int
	cmd  *exec.Cmd
}

// startPrivateServer creates and starts a private server, or skips the
// test when this machine cannot (no MariaDB binaries, not root).
func startPrivateServer(t *testing.T) *privateServer {
	t.Helper()
	install, err1 := exec.LookPath("mariadb-install-db")
	_, err2 := exec.LookPath("mariadbd")
	if err1 != nil || err2 != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil || err1 != nil {
			t.Skip("no mariadb-install-db and mariadbd on this machine")
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("a private server runs as root here (mariadbd --user=root)")
	}
	dir, err := os.MkdirTemp("", "kyu-mariadb-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	out, err := exec.Command(install, "--no-defaults", "--user=root", "--datadir="+filepath.Join(dir, "data"),
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &privateServer{t: t, dir: dir, port: port}
	p.start()
	t.Cleanup(p.kill)
	db, err := sql.Open("mysql", "root@unix("+p.socket()+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE kyu"); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *privateServer) socket() string { return filepath.Join(p.dir, "sock") }

// url names the private server's database kyu.
func (p *privateServer) url() string {
	return "mysql://root@/kyu?socket=" + p.socket() + "&timeout=2s"
}

// start runs mariadbd on the data directory and waits until it answers.
func (p *privateServer) start() {
	p.t.Helper()
	cmd := exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+filepath.Join(p.dir, "data"),
		"--socket="+p.socket(), fmt.Sprintf("--port=%d", p.port), "--bind-address=127.0.0.1",
		"--innodb-buffer-pool-size=32M", "--skip-log-bin", "--pid-file="+filepath.Join(p.dir, "pid"),
		"--log-error="+filepath.Join(p.dir, "error.log"))
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start mariadbd: %v", err)
	}
	p.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for {
		db, err := sql.Open("mysql", "root@unix("+p.socket()+")/")
		if err == nil {
			err = db.PingContext(p.t.Context())
			db.Close()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(p.dir, "error.log"))
			p.t.Fatalf("the private server did not answer within 60s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the server at once, as a crash does.
func (p *privateServer) kill() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	p.cmd = nil
}

// TestFaultServerRestart: the store's server crashes (SIGKILL) and comes
// back while jobs run: every acknowledged job is there after the restart,
// none is lost, none is held by two live leases.
func TestFaultServerRestart(t *testing.T) {
	t.Parallel()
	p := startPrivateServer(t)
	s, err := Open(t.Context(), p.url(), Options{AutoMigrate: true, MaxConns: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	restarts := 0
	faultLoad(t, s, 300, func(ctx context.Context) {
		for i := 0; i < 2 && ctx.Err() == nil; i++ {
			time.Sleep(300 * time.Millisecond)
			p.kill()
			time.Sleep(300 * time.Millisecond)
			p.start()
			restarts++
		}
	})
	if restarts == 0 {
		t.Fatal("the server was never restarted")
	}
	var n int
	if err := s.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM `"+s.Prefix()+"jobs`").Scan(&n); err != nil || n != 300 {
		t.Fatalf("jobs after %d restarts = %d, %v; want 300", restarts, n, err)
	}
}
