package benchmark

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report holds the figures of one Run. Durations marshal to JSON as
// nanoseconds.
type Report struct {
	// Backend describes the store measured; Run leaves it for the caller.
	Backend string `json:"backend,omitempty"`
	// RunID names the run's queues: kyu-bench-<RunID>-*.
	RunID        string    `json:"run_id"`
	Started      time.Time `json:"started"`
	GoVersion    string    `json:"go_version"`
	OS           string    `json:"os"`
	Arch         string    `json:"arch"`
	CPUs         int       `json:"cpus"`
	Jobs         int       `json:"jobs"`
	PayloadBytes int       `json:"payload_bytes"`
	Producers    int       `json:"producers"`
	Batch        int       `json:"batch"`
	// ClaimAhead is the draining workers' WorkerConfig.ClaimAhead.
	ClaimAhead int `json:"claim_ahead,omitempty"`

	// Enqueue is one job per Enqueue call, from Producers goroutines.
	Enqueue Throughput `json:"enqueue"`
	// BatchEnqueue is Batch jobs per EnqueueMany call, from Producers
	// goroutines.
	BatchEnqueue Throughput `json:"batch_enqueue"`
	// Drain has one figure per handler concurrency.
	Drain []Drain `json:"drain"`
	// Latency is enqueue-to-handler-start on an idle worker.
	Latency Latency `json:"latency"`
	// SyncFloor is what a durable write costs on the disk of an embedded
	// store; nil for other stores.
	SyncFloor *SyncFloor `json:"sync_floor,omitempty"`
}

// Throughput is how fast a number of jobs moved.
type Throughput struct {
	Jobs    int           `json:"jobs"`
	Calls   int           `json:"calls,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// PerSecond is jobs per second.
	PerSecond float64 `json:"per_second"`
	// CPUWait is the part of Elapsed during which some task on the
	// machine (the benchmark's, the store's or anyone's) was ready to run
	// but waited for a CPU, from Linux's /proc/pressure/cpu; nil where the
	// system does not report it. A high share means the rate says as much
	// about the machine as about the store.
	CPUWait *float64 `json:"cpu_wait,omitempty"`
}

// newThroughput computes the rate of jobs over elapsed.
func newThroughput(jobs, calls int, elapsed time.Duration) Throughput {
	t := Throughput{Jobs: jobs, Calls: calls, Elapsed: elapsed}
	if elapsed > 0 {
		t.PerSecond = float64(jobs) / elapsed.Seconds()
	}
	return t
}

// Drain is the time a worker with Concurrency handlers took to run and
// durably complete Jobs jobs that were waiting in its queue.
type Drain struct {
	Concurrency int `json:"concurrency"`
	Throughput
}

// Latency summarises enqueue-to-start times: from before the Enqueue call
// to the start of the handler, on a worker idle on its queue.
type Latency struct {
	Samples int           `json:"samples"`
	P50     time.Duration `json:"p50_ns"`
	P99     time.Duration `json:"p99_ns"`
	Max     time.Duration `json:"max_ns"`
	Mean    time.Duration `json:"mean_ns"`
	// CPUWait is as in Throughput, over the whole latency measurement.
	CPUWait *float64 `json:"cpu_wait,omitempty"`
}

// newLatency summarises samples, which it sorts.
func newLatency(samples []time.Duration) Latency {
	slices.Sort(samples)
	if len(samples) == 0 {
		return Latency{}
	}
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return Latency{
		Samples: len(samples),
		P50:     percentile(samples, 50),
		P99:     percentile(samples, 99),
		Max:     samples[len(samples)-1],
		Mean:    sum / time.Duration(len(samples)),
	}
}

// percentile is the nearest-rank p-th percentile of sorted samples.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// WriteText writes the report as a table for people.
func (r *Report) WriteText(w io.Writer) error {
	name := r.Backend
	if name == "" {
		name = "(unnamed store)"
	}
	if _, err := fmt.Fprintf(w, "kyu bench: %s\n%d jobs per measurement, %d-byte payloads, %s %s/%s, %d CPUs\n\n",
		name, r.Jobs, r.PayloadBytes, r.GoVersion, r.OS, r.Arch, r.CPUs); err != nil {
		return err
	}
	// The cpu wait column is left out where the system does not report it.
	wait := r.anyCPUWait()
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	row := func(cells ...string) {
		if !wait {
			cells = cells[:len(cells)-1]
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	throughput := func(name string, t Throughput) {
		row(name, fmt.Sprint(t.Jobs), seconds(t.Elapsed), fmt.Sprintf("%.0f jobs/s", t.PerSecond), percent(t.CPUWait))
	}
	row("measurement", "jobs", "time", "rate", "cpu wait")
	throughput(fmt.Sprintf("enqueue, 1 job per call, %d goroutines", r.Producers), r.Enqueue)
	throughput(fmt.Sprintf("enqueue, %d jobs per call, %d goroutines", r.Batch, r.Producers), r.BatchEnqueue)
	for _, d := range r.Drain {
		name := fmt.Sprintf("drain, %d handlers (run + durable complete)", d.Concurrency)
		if r.ClaimAhead > 0 {
			name = fmt.Sprintf("drain, %d handlers, %d claimed ahead (run + durable complete)", d.Concurrency, r.ClaimAhead)
		}
		throughput(name, d.Throughput)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	latencyWait := ""
	if r.Latency.CPUWait != nil {
		latencyWait = "  (cpu wait " + percent(r.Latency.CPUWait) + ")"
	}
	_, err := fmt.Fprintf(w, "\nenqueue-to-start latency, idle worker, %d samples: p50 %s  p99 %s  max %s%s\n",
		r.Latency.Samples, millis(r.Latency.P50), millis(r.Latency.P99), millis(r.Latency.Max), latencyWait)
	if err == nil && r.SyncFloor != nil {
		err = r.writeSyncFloor(w)
	}
	if err == nil && wait {
		_, err = fmt.Fprintln(w, "cpu wait: the share of each measurement's time in which some task on this machine waited for a CPU")
	}
	return err
}

// writeSyncFloor writes the sync floor, each way beside the figure it
// bounds: the mean one-job enqueue call against the mean back-to-back
// sync, and the enqueue-to-start p50 against the p50 sync after a pause.
func (r *Report) writeSyncFloor(w io.Writer) error {
	f := r.SyncFloor
	if _, err := fmt.Fprintf(w, "sync floor, %d-byte append + %s in the store's directory, %d samples each:\n",
		f.WriteBytes, f.Call, f.BackToBack.Samples); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, l Latency, note string) {
		fmt.Fprintf(tw, "  %s\tp50 %s\tp99 %s\tmean %s\t%s\n", name, millis(l.P50), millis(l.P99), millis(l.Mean), note)
	}
	note := ""
	if t := r.Enqueue; t.Calls > 0 {
		// Each goroutine waited for its calls one after another.
		goroutines := min(r.Producers, t.Calls)
		call := t.Elapsed * time.Duration(goroutines) / time.Duration(t.Calls)
		plural := "s"
		if goroutines == 1 {
			plural = ""
		}
		note = fmt.Sprintf("  a 1-job enqueue call, %d goroutine%s: mean %s, %s this mean",
			goroutines, plural, millis(call), times(call, f.BackToBack.Mean))
	}
	row("back to back", f.BackToBack, note)
	note = ""
	if r.Latency.Samples > 0 {
		note = fmt.Sprintf("  enqueue-to-start: p50 %s, %s this p50", millis(r.Latency.P50), times(r.Latency.P50, f.AfterPause.P50))
	}
	row("after a "+f.Pause.String()+" pause", f.AfterPause, note)
	return tw.Flush()
}

// times formats d as a multiple of base.
func times(d, base time.Duration) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f×", float64(d)/float64(base))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func millis(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

// percent formats a share as a whole percentage, "-" when unknown.
func percent(share *float64) string {
	if share == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", *share*100)
}

// anyCPUWait reports whether any measurement has a CPU wait share.
func (r *Report) anyCPUWait() bool {
	if r.Enqueue.CPUWait != nil || r.BatchEnqueue.CPUWait != nil || r.Latency.CPUWait != nil {
		return true
	}
	for _, d := range r.Drain {
		if d.CPUWait != nil {
			return true
		}
	}
	return false
}
