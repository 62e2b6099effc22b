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

	// The job series, bounded by maxLabels (Config.MaxMetricLabels):
	// series maps each (queue, type) pair that has series of its own, and
	// each "other" pair in use, to them; queues holds the queues among
	// those pairs, each of which keeps a slot for its "other" series; used
	// counts the slots taken. One more slot is kept for queue "other",
	// type "other".
	labelsMu  sync.RWMutex
	maxLabels int
	series    map[labelPair]*jobSeries
	queues    map[string]bool
	used      int
}

// otherLabel stands for the queues and types past Config.MaxMetricLabels.
const otherLabel = "other"

// labelPair is the queue and type labels of a job series.
type labelPair struct{ queue, typ string }

// jobSeries is one label pair's series in each job metric family,
// resolved once, so that counting a job hashes no label values.
type jobSeries struct {
	enqueued, completed, failed prometheus.Counter
	duration                    prometheus.Observer
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
		claims:    make(map[string]claimInfo),
		maxLabels: s.cfg.MaxMetricLabels,
		series:    make(map[labelPair]*jobSeries),
		queues:    make(map[string]bool),
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

// job returns the series a job of queue ("" for the default queue) and
// typ counts under: the pair's own while Config.MaxMetricLabels leaves
// room for it, else its queue's "other" series, else queue "other", type
// "other".
func (m *metrics) job(queue, typ string) *jobSeries {
	k := labelPair{queueOr(queue), typ}
	m.labelsMu.RLock()
	js, ok := m.series[k]
	if !ok && m.full() {
		js, ok = m.series[m.overflow(k)]
	}
	m.labelsMu.RUnlock()
	if ok {
		return js
	}
	m.labelsMu.Lock()
	defer m.labelsMu.Unlock()
	if js, ok := m.series[k]; ok {
		return js
	}
	need := 1
	if !m.queues[k.queue] {
		need = 2 // the pair's series and its queue's "other" series
	}
	if m.used+need < m.maxLabels { // the last slot is other/other's
		m.used += need
		m.queues[k.queue] = true
		return m.add(k)
	}
	over := m.overflow(k)
	if js, ok := m.series[over]; ok {
		return js
	}
	return m.add(over)
}

// full reports whether no new pair can get series of its own (used only
// grows). m.labelsMu is held.
func (m *metrics) full() bool { return m.used+1 >= m.maxLabels }

// overflow is the "other" pair that k counts under when it has no
// series of its own. m.labelsMu is held.
func (m *metrics) overflow(k labelPair) labelPair {
	if m.queues[k.queue] {
		return labelPair{k.queue, otherLabel}
	}
	return labelPair{otherLabel, otherLabel}
}

// add creates k's series in every job family. m.labelsMu is held for
// writing.
func (m *metrics) add(k labelPair) *jobSeries {
	js := &jobSeries{
		enqueued:  m.enqueued.WithLabelValues(k.queue, k.typ),
		completed: m.completed.WithLabelValues(k.queue, k.typ),
		failed:    m.failed.WithLabelValues(k.queue, k.typ),
		duration:  m.duration.WithLabelValues(k.queue, k.typ),
	}
	m.series[k] = js
	return js
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
		s.events.job(jobEvent{ID: j.ID, Change: "claimed", Queue: j.Queue, Type: j.Type, State: backend.StateActive})
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
	if ok && change != "released" {
		js := m.job(ci.queue, ci.typ)
		switch change {
		case "completed":
			js.completed.Inc()
		case "failed":
			js.failed.Inc()
		}
		js.duration.Observe(now.Sub(ci.started).Seconds())
	}
	s.events.job(jobEvent{ID: id, Change: change, Queue: ci.queue, Type: ci.typ})
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

// instrument counts and times the requests of one route. Its series are
// resolved once (the latency) or once per status (the counter), so a
// request hashes no label values.
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	rm := &routeMetrics{route: route, requests: s.metrics.requests, byStatus: make(map[int]prometheus.Counter)}
	lat := s.metrics.latency.WithLabelValues(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		lat.Observe(time.Since(start).Seconds())
		rm.counter(rec.status).Inc()
	})
}

// routeMetrics holds one route's request counters by status.
type routeMetrics struct {
	route    string
	requests *prometheus.CounterVec
	mu       sync.RWMutex
	byStatus map[int]prometheus.Counter
}

// counter returns the route's counter of answers with status.
func (rm *routeMetrics) counter(status int) prometheus.Counter {
	rm.mu.RLock()
	c, ok := rm.byStatus[status]
	rm.mu.RUnlock()
	if ok {
		return c
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if c, ok := rm.byStatus[status]; ok {
		return c
	}
	c = rm.requests.WithLabelValues(rm.route, strconv.Itoa(status))
	rm.byStatus[status] = c
	return c
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
// state, each queue's latency (age of its oldest pending job), the
// attempts ended in the whole store (through this server or not) and the
// live workers.
type storeCollector struct {
	s                      *Server
	jobs, latency, workers *prometheus.Desc
	processed, failed      *prometheus.Desc
}

// newStoreCollector builds the collector and its descriptions.
func newStoreCollector(s *Server) *storeCollector {
	return &storeCollector{
		s:       s,
		jobs:    prometheus.NewDesc("kyu_queue_jobs", "Jobs per queue and state.", []string{"queue", "state"}, nil),
		latency: prometheus.NewDesc("kyu_queue_latency_seconds", "Age of the oldest pending job per queue.", []string{"queue"}, nil),
		workers: prometheus.NewDesc("kyu_workers_active", "Worker processes registered and not dead.", nil, nil),
		processed: prometheus.NewDesc("kyu_store_attempts_processed_total",
			"Attempts ended in the store since it was created, by any worker or server: each complete, each fail and each lease recovered.", nil, nil),
		failed: prometheus.NewDesc("kyu_store_attempts_failed_total",
			"Attempts failed in the store since it was created, by any worker or server: each fail and each lease recovered.", nil, nil),
	}
}

// Describe sends the descriptions of the store's metrics.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.latency
	ch <- c.workers
	ch <- c.processed
	ch <- c.failed
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
		ch <- prometheus.MustNewConstMetric(c.processed, prometheus.CounterValue, float64(st.Processed))
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(st.Failed))
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
