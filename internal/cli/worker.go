//go:build unix

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/kyuhq/kyu"
	"github.com/kyuhq/kyu/backend/backendurl"
	"github.com/kyuhq/kyu/daemon"
)

// Environment variables of kyu worker, each below its flag and above the
// config file.
const (
	configEnv          = "KYU_CONFIG"
	profileEnv         = "KYU_PROFILE"
	queuesEnv          = "KYU_QUEUES"
	concurrencyEnv     = "KYU_CONCURRENCY"
	shutdownTimeoutEnv = "KYU_SHUTDOWN_TIMEOUT"
	killGraceEnv       = "KYU_KILL_GRACE"
	maxJobsEnv         = "KYU_MAX_JOBS"
	leaseEnv           = "KYU_LEASE"
	prefetchEnv        = "KYU_PREFETCH"
	logFormatEnv       = "KYU_LOG_FORMAT"
	logLevelEnv        = "KYU_LOG_LEVEL"
	jobLogLevelEnv     = "KYU_JOB_LOG_LEVEL"
)

// workerFlags are kyu worker's flags; a zero value is "not given".
type workerFlags struct {
	backendURL      string
	config          string
	profile         string
	handle          []string
	queues          string
	concurrency     int
	shutdownTimeout time.Duration
	killGrace       time.Duration
	maxJobs         int
	lease           time.Duration
	prefetch        int
	logFormat       string
	logLevel        string
	jobLogLevel     string
	printConfig     bool
	noGuardian      bool

	changed func(name string) bool
}

func newWorkerCommand() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run jobs as child processes: a worker in any language",
		Long: `Claim jobs from a store and run each in a child process of the
handler of its type: the job as one JSON object on the child's stdin, its
fields in KYU_* environment variables, progress, log and result lines on
file descriptor 3, stdout and stderr as the job's log, the exit code as
the outcome (0 done, 75 retry, 65 failed for good, any other the
handler's retry policy). docs/worker.md is the protocol.

Handlers come from --handle TYPE=COMMAND (run with /bin/sh -c; repeat for
more types) or from a TOML config file (--config, $` + configEnv + `), which
also holds named profiles (--profile) of queues, weights, per-queue caps,
concurrency, shutdown_timeout, kill_grace and max_jobs, and per handler
an argv run directly, a timeout, env, dir and a retry policy. Flags, then
KYU_* variables, override the file; --print-config shows the result.
With no handler it is a usage error: it never claims jobs it cannot run.

The store is --backend, else $KYU_BACKEND, else http://127.0.0.1:7420 (the
default kyu server).

Signals: TERM or INT stops claiming, lets running jobs finish within
shutdown_timeout (default 30s), then sends SIGTERM to their process
groups and SIGKILL after kill_grace (default 5s), and hands unfinished
jobs back unspent; a second TERM or INT stops at once. TSTP stops
claiming (quiet) and CONT resumes; HUP reloads the config (a new
generation takes new jobs, the old one finishes its own); TTIN logs the
running jobs. Logs go to stderr: one line per job start and finish, at
info (--job-log-level: debug, info, warn, error or off).`,
		Example: `  kyu worker --handle email.send='./send-mail.sh --fast' --queues default,mail --concurrency 8
  kyu worker --handle thumb='python3 thumb.py' --queues images=3,default=1
  kyu worker --config worker.toml --profile batch
  kyu worker --config worker.toml --print-config`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.changed = cmd.Flags().Changed
			return runWorkerCommand(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.backendURL, "backend", "", "store as a URL (default $"+backendEnv+", else "+defaultOperatorURL+", the default kyu server)")
	fl.StringVar(&f.config, "config", "", "TOML config file (default $"+configEnv+")")
	fl.StringVar(&f.profile, "profile", "", "profile of the config file to run (default $"+profileEnv+", else the file's profile key)")
	fl.StringArrayVar(&f.handle, "handle", nil, "TYPE=COMMAND: run jobs of TYPE with /bin/sh -c COMMAND, or POST them to COMMAND if it is an http(s):// URL (repeat for more types)")
	fl.StringVar(&f.queues, "queues", "", "queues to serve, in strict order (a,b) or weighted (a=3,b=1) (default $"+queuesEnv+", else default)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "jobs run at once, all queues together (default $"+concurrencyEnv+", else 10)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 0, "time running jobs get to finish at a stop (default $"+shutdownTimeoutEnv+", else 30s)")
	fl.DurationVar(&f.killGrace, "kill-grace", 0, "time between SIGTERM and SIGKILL to a child's process group (default $"+killGraceEnv+", else 5s)")
	fl.IntVar(&f.maxJobs, "max-jobs", 0, "exit 0 after this many jobs, for the supervisor to start a fresh worker (default $"+maxJobsEnv+", else no limit)")
	fl.DurationVar(&f.lease, "lease", 0, "how long a claim holds a job without a heartbeat (default $"+leaseEnv+", else 30s)")
	fl.IntVar(&f.prefetch, "prefetch", 0, "jobs claimed ahead per prefork child, handed to it as it answers (default $"+prefetchEnv+", else 1; 0 for none)")
	fl.StringVar(&f.logFormat, "log-format", "", "log format: text or json (default $"+logFormatEnv+", else text)")
	fl.StringVar(&f.logLevel, "log-level", "", "lowest level logged: debug, info, warn or error (default $"+logLevelEnv+", else info)")
	fl.StringVar(&f.jobLogLevel, "job-log-level", "", "level of the per-job start and finish lines: debug, info, warn, error or off (default $"+jobLogLevelEnv+", else info)")
	fl.BoolVar(&f.printConfig, "print-config", false, "print the merged config as TOML and exit")
	fl.BoolVar(&f.noGuardian, "no-guardian", false, "run no guardian process (children may outlive a daemon killed with SIGKILL)")
	_ = fl.MarkHidden("no-guardian")
	return cmd
}

// workerSetup is what kyu worker runs with, once flags, environment and
// file are merged.
type workerSetup struct {
	backendURL string
	profile    string
	logFormat  string
	logLevel   slog.Level
	cfg        daemon.Config
}

// resolveWorker merges the config file, the environment and the flags;
// every error is a usage error.
func resolveWorker(f workerFlags, getenv func(string) string) (workerSetup, error) {
	changed := f.changed
	if changed == nil {
		changed = func(string) bool { return false }
	}
	pick := func(flag, envName string) string {
		if changed(flag) {
			return "\x00flag"
		}
		return getenv(envName)
	}
	var s workerSetup
	path := f.config
	if path == "" {
		path = getenv(configEnv)
	}
	var file *daemon.File
	if path != "" {
		var err error
		file, err = daemon.ReadFile(path)
		if err != nil {
			return s, &UsageError{Err: err}
		}
	}
	s.profile = f.profile
	if s.profile == "" {
		s.profile = getenv(profileEnv)
	}
	if file != nil {
		cfg, err := file.Config(s.profile)
		if err != nil {
			return s, &UsageError{Err: err}
		}
		s.cfg = cfg
		if s.profile == "" {
			s.profile = file.Profile
		}
		s.backendURL, s.logFormat = file.Backend, file.LogFormat
		if file.LogLevel != "" {
			if err := s.logLevel.UnmarshalText([]byte(file.LogLevel)); err != nil {
				return s, usageErrorf("%s: log_level %q: want debug, info, warn or error", path, file.LogLevel)
			}
		}
		if file.JobLogLevel != "" {
			// ParseFile checked it.
			s.cfg.JobLogLevel, s.cfg.JobLogOff, _ = daemon.ParseJobLogLevel(file.JobLogLevel)
		}
	} else if s.profile != "" {
		return s, usageErrorf("--profile %s needs a config file (--config or $%s)", s.profile, configEnv)
	}
	if s.cfg.Handlers == nil {
		s.cfg.Handlers = map[string]daemon.HandlerConfig{}
	}

	// The store: flag, else KYU_BACKEND, else the file, else the default.
	if f.backendURL != "" {
		s.backendURL = f.backendURL
	} else if env := getenv(backendEnv); env != "" {
		s.backendURL = env
	} else if s.backendURL == "" {
		s.backendURL = defaultOperatorURL
	}

	if v := pick("queues", queuesEnv); v != "" {
		raw, name := f.queues, "--queues"
		if v != "\x00flag" {
			raw, name = v, "$"+queuesEnv
		}
		qs, err := parseQueues(raw)
		if err != nil {
			return s, usageErrorf("%s %q: %v", name, raw, err)
		}
		s.cfg.Queues = qs
	}
	type intSetting struct {
		flag, env string
		val       int
		dst       *int
	}
	for _, it := range []intSetting{
		{"concurrency", concurrencyEnv, f.concurrency, &s.cfg.Concurrency},
		{"max-jobs", maxJobsEnv, f.maxJobs, &s.cfg.MaxJobs},
		{"prefetch", prefetchEnv, f.prefetch, &s.cfg.Prefetch},
	} {
		switch v := pick(it.flag, it.env); v {
		case "":
		case "\x00flag":
			*it.dst = it.val
		default:
			n, err := strconv.Atoi(v)
			if err != nil {
				return s, usageErrorf("$%s %q: not a number", it.env, v)
			}
			*it.dst = n
		}
	}
	type durSetting struct {
		flag, env string
		val       time.Duration
		dst       *time.Duration
	}
	for _, it := range []durSetting{
		{"shutdown-timeout", shutdownTimeoutEnv, f.shutdownTimeout, &s.cfg.ShutdownTimeout},
		{"kill-grace", killGraceEnv, f.killGrace, &s.cfg.KillGrace},
		{"lease", leaseEnv, f.lease, &s.cfg.Lease},
	} {
		switch v := pick(it.flag, it.env); v {
		case "":
		case "\x00flag":
			*it.dst = it.val
		default:
			d, err := time.ParseDuration(v)
			if err != nil {
				return s, usageErrorf("$%s %q: not a duration such as 30s", it.env, v)
			}
			*it.dst = d
		}
	}
	if changed("prefetch") || getenv(prefetchEnv) != "" {
		switch {
		case s.cfg.Prefetch < 0:
			return s, usageErrorf("--prefetch %d: want 0 (none) or more", s.cfg.Prefetch)
		case s.cfg.Prefetch == 0:
			s.cfg.Prefetch = -1 // 0 asked for: none
		}
	}
	if s.cfg.ShutdownTimeout == 0 && (changed("shutdown-timeout") || getenv(shutdownTimeoutEnv) != "") {
		s.cfg.ShutdownTimeout = -1 // 0 asked for: no time to finish
	}
	if f.logFormat != "" {
		s.logFormat = f.logFormat
	} else if v := getenv(logFormatEnv); v != "" {
		s.logFormat = v
	}
	if s.logFormat == "" {
		s.logFormat = "text"
	}
	if s.logFormat != "text" && s.logFormat != "json" {
		return s, usageErrorf("--log-format %q: want text or json", s.logFormat)
	}
	level := f.logLevel
	if level == "" {
		level = getenv(logLevelEnv)
	}
	if level != "" {
		if err := s.logLevel.UnmarshalText([]byte(level)); err != nil {
			return s, usageErrorf("--log-level %q: want debug, info, warn or error", level)
		}
	}
	jobLevel, name := f.jobLogLevel, "--job-log-level"
	if jobLevel == "" {
		jobLevel, name = getenv(jobLogLevelEnv), "$"+jobLogLevelEnv
	}
	if jobLevel != "" {
		var err error
		if s.cfg.JobLogLevel, s.cfg.JobLogOff, err = daemon.ParseJobLogLevel(jobLevel); err != nil {
			return s, usageErrorf("%s %v", name, err)
		}
	}
	for _, h := range f.handle {
		t, command, ok := strings.Cut(h, "=")
		if !ok || t == "" || strings.TrimSpace(command) == "" {
			return s, usageErrorf("--handle %q: want TYPE=COMMAND, such as --handle email.send='./send-mail.sh'", h)
		}
		if strings.HasPrefix(command, "http://") || strings.HasPrefix(command, "https://") {
			s.cfg.Handlers[t] = daemon.HandlerConfig{URL: command}
		} else {
			s.cfg.Handlers[t] = daemon.HandlerConfig{Shell: command}
		}
	}
	if len(s.cfg.Handlers) == 0 {
		return s, usageErrorf("no handler: give --handle TYPE=COMMAND or a config file with [handlers.TYPE]; a worker never claims jobs it cannot run")
	}
	if err := s.cfg.Validate(); err != nil {
		return s, &UsageError{Err: err}
	}
	return s, nil
}

// parseQueues reads "a,b" (strict) or "a=3,b=1" (weighted).
func parseQueues(raw string) ([]kyu.PoolQueue, error) {
	var qs []kyu.PoolQueue
	for part := range strings.SplitSeq(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, w, weighted := strings.Cut(part, "=")
		q := kyu.PoolQueue{Name: name}
		if weighted {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("weight %q of queue %s: want a whole number, at least 1", w, name)
			}
			q.Weight = n
		}
		qs = append(qs, q)
	}
	if len(qs) == 0 {
		return nil, errors.New("no queue")
	}
	return qs, nil
}

// printedConfig is the merged config as --print-config writes it.
type printedConfig struct {
	Backend         string                        `toml:"backend"`
	Profile         string                        `toml:"profile,omitempty"`
	LogFormat       string                        `toml:"log_format"`
	LogLevel        string                        `toml:"log_level"`
	JobLogLevel     string                        `toml:"job_log_level"`
	Concurrency     int                           `toml:"concurrency"`
	Queues          []string                      `toml:"queues"`
	Weights         map[string]int                `toml:"weights,omitempty"`
	Max             map[string]int                `toml:"max,omitempty"`
	ShutdownTimeout daemon.Duration               `toml:"shutdown_timeout"`
	KillGrace       daemon.Duration               `toml:"kill_grace"`
	MaxJobs         int                           `toml:"max_jobs"`
	Lease           daemon.Duration               `toml:"lease,omitempty"`
	Prefetch        int                           `toml:"prefetch"`
	Handlers        map[string]daemon.FileHandler `toml:"handlers"`
}

// printConfig writes the merged config as TOML, its defaults filled in.
func printConfig(w io.Writer, s workerSetup) error {
	c := s.cfg.WithDefaults()
	p := printedConfig{
		Backend: s.backendURL, Profile: s.profile, LogFormat: s.logFormat,
		LogLevel: strings.ToLower(s.logLevel.String()), JobLogLevel: daemon.FormatJobLogLevel(c.JobLogLevel, c.JobLogOff),
		Concurrency:     c.Concurrency,
		ShutdownTimeout: daemon.Duration(max(c.ShutdownTimeout, 0)), KillGrace: daemon.Duration(c.KillGrace),
		MaxJobs: c.MaxJobs, Lease: daemon.Duration(c.Lease), Prefetch: max(c.Prefetch, 0), Handlers: map[string]daemon.FileHandler{},
	}
	if p.Lease == 0 {
		p.Lease = daemon.Duration(30 * time.Second) // kyu's default
	}
	for _, q := range c.Queues {
		p.Queues = append(p.Queues, q.Name)
		if q.Weight > 0 {
			if p.Weights == nil {
				p.Weights = map[string]int{}
			}
			p.Weights[q.Name] = q.Weight
		}
		if q.Max > 0 {
			if p.Max == nil {
				p.Max = map[string]int{}
			}
			p.Max[q.Name] = q.Max
		}
	}
	for _, t := range slices.Sorted(maps.Keys(c.Handlers)) {
		h := c.Handlers[t]
		fh := daemon.FileHandler{Command: h.Command, Shell: h.Shell, URL: h.URL, Timeout: daemon.Duration(h.Timeout),
			Prefork: h.Prefork, MaxJobsPerChild: h.MaxJobsPerChild,
			Env: h.Env, Dir: h.Dir, Backoff: h.Retry.Backoff,
			BackoffBase: daemon.Duration(h.Retry.BackoffBase), BackoffMax: daemon.Duration(h.Retry.BackoffMax)}
		if h.Retry.NoRetry {
			no := false
			fh.Retry = &no
		}
		p.Handlers[t] = fh
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(p); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// newWorkerLogger is the daemon's logger on stderr.
func newWorkerLogger(stderr io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(stderr, opts))
	}
	return slog.New(slog.NewTextHandler(stderr, opts))
}

// runWorkerCommand resolves the config and runs the daemon until a signal or
// ctx ends it.
func runWorkerCommand(ctx context.Context, f workerFlags, stdout, stderr io.Writer) error {
	s, err := resolveWorker(f, os.Getenv)
	if err != nil {
		return err
	}
	if f.printConfig {
		return printConfig(stdout, s)
	}
	log := newWorkerLogger(stderr, s.logFormat, s.logLevel)
	s.cfg.Logger = log

	if runtime.GOOS == "linux" && !f.noGuardian {
		exe, err := os.Executable()
		if err == nil {
			var g *daemon.Guardian
			g, err = daemon.StartGuardian(exe, log)
			if err == nil {
				defer g.Close()
				s.cfg.Guard = g
			}
		}
		if err != nil {
			log.Warn("no guardian process: children may outlive this worker if it is killed with SIGKILL", "error", err)
		}
	}

	b, err := backendurl.Open(ctx, s.backendURL, backendurl.Options{Logger: log, Token: os.Getenv(tokenEnv)})
	if err != nil {
		return err
	}
	defer b.Close()
	d, err := daemon.New(b, s.cfg)
	if err != nil {
		return &UsageError{Err: err}
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGTSTP, syscall.SIGCONT, syscall.SIGHUP, syscall.SIGTTIN)
	defer signal.Stop(sigs)
	runDone := make(chan struct{})
	defer close(runDone)
	go func() {
		stops := 0
		for {
			var sig os.Signal
			select {
			case sig = <-sigs:
			case <-runDone:
				return
			}
			switch sig {
			case syscall.SIGTERM, syscall.SIGINT:
				stops++
				if stops == 1 {
					log.Info("signal: stopping gracefully (send it again to stop at once)", "signal", sig.String())
					d.Stop()
				} else {
					log.Info("signal: stopping at once", "signal", sig.String())
					d.StopNow()
				}
			case syscall.SIGTSTP:
				log.Info("signal: quiet", "signal", sig.String())
				d.Quiet()
			case syscall.SIGCONT:
				if err := d.Resume(); err != nil {
					log.Error("resume", "error", err)
				}
			case syscall.SIGHUP:
				ns, err := resolveWorker(f, os.Getenv)
				if err != nil {
					log.Error("reload: config refused; the current one stays", "error", Message(err))
					continue
				}
				ns.cfg.Logger, ns.cfg.Guard = log, s.cfg.Guard
				if err := d.Reload(ns.cfg); err != nil {
					log.Error("reload: config refused; the current one stays", "error", err)
				}
			case syscall.SIGTTIN:
				d.LogState()
			}
		}
	}()
	return d.Run(ctx)
}
