package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kyuhq/kyu/backend"
)

// metrics holds the server's Prometheus metrics on a registry of its own
// (never the global one), so servers side by side do not collide.
type metrics struct {
	reg          *prometheus.Registry
	handler      http.Handler
	enqueued     *prometheus.CounterVec
	completed    *prometheus.CounterVec
	failed       *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	pollsRefused prometheus.Counter

	// claims remembers the jobs claimed through this server until their
	// attempt ends here, for the counters by queue and type and for the
	// durations.
	mu     sync.Mutex
	claims map[string]claimInfo
}

// claimInfo is what the server knows of a job it handed out.
type claimInfo struct {
	queue, typ string
	started    time.Time
	expires    time.Time
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kyu_jobs_enqueued_total", Help: "Jobs enqueued through this server.",
		}, []string{"queue", "type"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kyu_jobs_completed_total", Help: "Jobs completed through this server.",
		}, []string{"queue", "type"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kyu_jobs_failed_total", Help: "Attempts failed through this server.",
		}, []string{"queue", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kyu_job_duration_seconds", Help: "From claim to the end of the attempt, for jobs claimed and ended through this server.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"queue", "type"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kyu_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kyu_http_request_duration_seconds", Help: "HTTP request durations by route (long-polls included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route"}),
		pollsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kyu_long_polls_refused_total", Help: "Waits answered at once or streams refused because every long-poll slot was taken.",
		}),
		claims: make(map[string]claimInfo),
	}
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kyu_long_polls_in_flight", Help: "Requests waiting now (claims with a wait, job waits, event streams).",
	}, func() float64 { return float64(len(s.polls)) })
	m.reg.MustRegister(inFlight, m.enqueued, m.completed, m.failed, m.duration, m.requests, m.latency, m.pollsRefused,
		newStoreCollector(s),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
	return m
}

// handleMetrics serves GET /metrics.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.metrics.handler.ServeHTTP(w, r)
}

// noteClaimed remembers claimed jobs and reports them to event streams.
func (s *Server) noteClaimed(jobs []*backend.Job, now time.Time) {
	if len(jobs) == 0 {
		return
	}
	m := s.metrics
	m.mu.Lock()
	for _, j := range jobs {
		m.claims[j.ID] = claimInfo{queue: j.Queue, typ: j.Type, started: now, expires: j.LeaseExpiresAt}
	}
	m.mu.Unlock()
	for _, j := range jobs {
		s.events.publish(event{Kind: "job", Job: &jobEvent{ID: j.ID, Change: "claimed", Queue: j.Queue, Type: j.Type, State: backend.StateActive}})
	}
}

// noteEnded counts an attempt that ended through this server (change is
// completed, failed or released) and reports it to event streams.
func (s *Server) noteEnded(id, change string, now time.Time) {
	m := s.metrics
	m.mu.Lock()
	ci, ok := m.claims[id]
	delete(m.claims, id)
	m.mu.Unlock()
	if ok {
		switch change {
		case "completed":
			m.completed.WithLabelValues(ci.queue, ci.typ).Inc()
		case "failed":
			m.failed.WithLabelValues(ci.queue, ci.typ).Inc()
		}
		if change != "released" {
			m.duration.WithLabelValues(ci.queue, ci.typ).Observe(now.Sub(ci.started).Seconds())
		}
	}
	s.events.publish(event{Kind: "job", Job: &jobEvent{ID: id, Change: change, Queue: ci.queue, Type: ci.typ}})
}

// forgetClaims drops claims whose lease ended over a minute ago: their
// attempts ended elsewhere (lease recovery, another server).
func (s *Server) forgetClaims(now time.Time) {
	m := s.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ci := range m.claims {
		if now.Sub(ci.expires) > time.Minute {
			delete(m.claims, id)
		}
	}
}

// instrument counts and times the requests of one route.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	lat := s.metrics.latency.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		lat.Observe(time.Since(start).Seconds())
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
	})
}

// statusRecorder remembers the status a handler sent.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status.
func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush lets event streams flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// storeCollector reads the store at scrape time: jobs per queue and
// state, each queue's latency (age of its oldest pending job) and the
// live workers.
type storeCollector struct {
	s                      *Server
	jobs, latency, workers *prometheus.Desc
}

// newStoreCollector builds the collector and its descriptions.
func newStoreCollector(s *Server) *storeCollector {
	return &storeCollector{
		s:       s,
		jobs:    prometheus.NewDesc("kyu_queue_jobs", "Jobs per queue and state.", []string{"queue", "state"}, nil),
		latency: prometheus.NewDesc("kyu_queue_latency_seconds", "Age of the oldest pending job per queue.", []string{"queue"}, nil),
		workers: prometheus.NewDesc("kyu_workers_active", "Worker processes registered and not dead.", nil, nil),
	}
}

// Describe sends the descriptions of the store's metrics.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.latency
	ch <- c.workers
}

// Collect reads the store; a store that cannot answer (or does not
// support statistics) leaves its metrics out of this scrape.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.s.clockNow()
	if st, err := c.s.b.Stats(ctx, backend.StatsParams{Now: now}); err == nil {
		for _, q := range st.Queues {
			for state, n := range q.Counts {
				ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), q.Name, string(state))
			}
			lat := 0.0
			if !q.OldestPending.IsZero() {
				lat = max(0, now.Sub(q.OldestPending).Seconds())
			}
			ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, lat, q.Name)
		}
	}
	if ws, err := c.s.b.Workers(ctx, backend.WorkersParams{Now: now}); err == nil {
		n := 0
		for _, w := range ws {
			if !w.Dead {
				n++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(n))
	}
}
