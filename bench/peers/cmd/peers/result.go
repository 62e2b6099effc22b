package main

// result is one system's four measurements in one round, one JSON line
// of the results file. The BullMQ script (bullmq/peers.mjs) writes the
// same fields.
type result struct {
	System  string `json:"system"`  // kyu, asynq, BullMQ, River
	Version string `json:"version"` // the library's version or kyu's commit
	Store   string `json:"store"`   // redis, postgres, embedded
	Round   int    `json:"round"`
	Load    string `json:"load"` // /proc/loadavg's three averages at the start
	Jobs    int    `json:"jobs"`
	Batch   int    `json:"batch"`
	Drain   int    `json:"drain_handlers"`
	Idle    int    `json:"idle_handlers"`

	// Jobs per second; BatchPerSec is null for a system without a batch
	// enqueue.
	BatchPerSec  *float64 `json:"batch_per_s"`
	SinglePerSec float64  `json:"single_per_s"`
	DrainPerSec  float64  `json:"drain_per_s"`
	// Idle enqueue-to-start latency in milliseconds.
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	Samples int     `json:"samples"`

	// Ran counts the drain's handler calls (Jobs unless a job ran twice);
	// Completed is the store's count of completed jobs after the drain.
	Ran       int64   `json:"ran"`
	Completed int64   `json:"completed"`
	Seconds   float64 `json:"seconds"` // the whole run of this system
}
