package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kyuhq/kyu/backend"
)

// BenchmarkImportCPU measures what Import costs Redis per job, on a
// private server: b.N pending jobs of 100 bytes whose ids come from
// another store (UUIDv7s, so each gets a home), in calls of 1,000, as
// kyu copy writes them. It reports the server's main-thread CPU time
// (INFO cpu), its scripts' time (commandstats) and the jobs per second.
//
//	go test -run '^$' -bench ImportCPU -benchtime 200000x -v ./backend/redis/
func BenchmarkImportCPU(b *testing.B) {
	ps := startServer(b, "--appendonly", "no")
	ctx := context.Background()
	s, err := Open(ctx, Options{Addrs: []string{ps.addr()}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	batches := make([][]*backend.Job, 0, b.N/1000+1)
	for done := 0; done < b.N; done += 1000 {
		jobs := make([]*backend.Job, min(1000, b.N-done))
		for i := range jobs {
			jobs[i] = &backend.Job{ID: uuid.Must(uuid.NewV7()).String(), Type: "email.send", Queue: "emails",
				State: backend.StatePending, MaxAttempts: 3, RunAt: now, Timeout: time.Minute, CreatedAt: now,
				Payload: benchPayload}
		}
		batches = append(batches, jobs)
	}
	cpu0, cmd0 := mainThreadCPU(b, s), commandTimes(b, s)
	_, scripts0, _ := redisTimes(b, s)
	b.ResetTimer()
	start := time.Now()
	for _, jobs := range batches {
		res, err := s.Import(ctx, backend.ImportParams{Jobs: jobs, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		if res.Items[0].Outcome != backend.ImportCreated {
			b.Fatalf("Import: %+v", res.Items[0])
		}
	}
	el := time.Since(start)
	b.StopTimer()
	cpu1, cmd1 := mainThreadCPU(b, s), commandTimes(b, s)
	_, scripts1, _ := redisTimes(b, s)
	n := float64(b.N)
	var l []string
	for c, us := range cmd1 {
		if d := (us - cmd0[c]) / n; d >= 0.05 {
			l = append(l, c+" "+strconv.FormatFloat(d, 'f', 2, 64))
		}
	}
	slices.Sort(l)
	b.Logf("µs per job by command: %s", strings.Join(l, ", "))
	b.ReportMetric((cpu1-cpu0)/n, "cpu-µs/job")
	b.ReportMetric((scripts1-scripts0)/n, "scripts-µs/job")
	b.ReportMetric(n/el.Seconds(), "jobs/s")
}

// mainThreadCPU is the server's main thread's CPU time in µs (INFO cpu:
// user and system), which leaves out the background threads that free
// memory.
func mainThreadCPU(b *testing.B, s *Store) float64 {
	out, err := s.client.Do(context.Background(), s.client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var cpu float64
	for _, l := range strings.Split(out, "\r\n") {
		for _, f := range []string{"used_cpu_user_main_thread:", "used_cpu_sys_main_thread:"} {
			if v, ok := strings.CutPrefix(l, f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				cpu += x * 1e6
			}
		}
	}
	return cpu
}
