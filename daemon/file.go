package daemon

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/kyuhq/kyu"
)

// File is a worker config file (TOML). Every field of a profile may also
// be given at the top level, where it applies to every profile that does
// not set it; handlers at the top level serve every profile, and a
// profile's own handlers add to them (or replace one of the same type).
//
//	backend = "http://127.0.0.1:7420"
//	profile = "web"                  # the profile used without --profile
//	shutdown_timeout = "30s"
//
//	[profiles.web]
//	concurrency = 8
//	queues = ["critical", "default"] # strict order
//	max = { default = 6 }            # per-queue caps
//
//	[profiles.batch]
//	queues = ["reports", "exports"]
//	weights = { reports = 3, exports = 1 }
//	max_jobs = 1000
//
//	[handlers."email.send"]
//	command = ["./send-mail", "--fast"]
//	timeout = "2m"
//	env = { SMTP_HOST = "localhost" }
type File struct {
	// Path is where the file was read from.
	Path string `toml:"-"`

	// Backend is the store's URL, as --backend.
	Backend string `toml:"backend,omitempty"`
	// Profile names the profile used when none is asked for.
	Profile string `toml:"profile,omitempty"`
	// LogFormat is "text" or "json"; LogLevel "debug", "info", "warn" or
	// "error".
	LogFormat string `toml:"log_format,omitempty"`
	LogLevel  string `toml:"log_level,omitempty"`
	// JobLogLevel is the level of the per-job start and finish lines:
	// "debug", "info", "warn", "error" or "off" (see ParseJobLogLevel).
	JobLogLevel string `toml:"job_log_level,omitempty"`

	FileProfile
	Profiles map[string]FileProfile `toml:"profiles,omitempty"`

	src []byte
}

// FileProfile is a profile of a File. Unset fields take the top level's
// value, then Config's default.
type FileProfile struct {
	Concurrency     *int                   `toml:"concurrency,omitempty"`
	Queues          []string               `toml:"queues,omitempty"`
	Weights         map[string]int         `toml:"weights,omitempty"`
	Max             map[string]int         `toml:"max,omitempty"`
	ShutdownTimeout *Duration              `toml:"shutdown_timeout,omitempty"`
	KillGrace       *Duration              `toml:"kill_grace,omitempty"`
	MaxJobs         *int                   `toml:"max_jobs,omitempty"`
	Lease           *Duration              `toml:"lease,omitempty"`
	Prefetch        *int                   `toml:"prefetch,omitempty"`
	Handlers        map[string]FileHandler `toml:"handlers,omitempty"`
}

// FileHandler is a handler of a File (see HandlerConfig). A relative dir
// is taken from the config file's directory.
type FileHandler struct {
	Command         []string          `toml:"command,omitempty"`
	Shell           string            `toml:"shell,omitempty"`
	URL             string            `toml:"url,omitempty"`
	Prefork         int               `toml:"prefork,omitzero"`
	MaxJobsPerChild int               `toml:"max_jobs_per_child,omitzero"`
	Timeout         Duration          `toml:"timeout,omitzero"`
	Env             map[string]string `toml:"env,omitempty"`
	Dir             string            `toml:"dir,omitempty"`
	Retry           *bool             `toml:"retry,omitempty"`
	Backoff         string            `toml:"backoff,omitempty"`
	BackoffBase     Duration          `toml:"backoff_base,omitzero"`
	BackoffMax      Duration          `toml:"backoff_max,omitzero"`
}

// Duration is a time.Duration written as a string such as "30s" or "2m".
type Duration time.Duration

// UnmarshalText parses a duration such as "1m30s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("not a duration such as \"30s\" or \"2m\": %q", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as time.Duration.String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// FileError is a problem of a config file, with the line it is on when
// known and the key it concerns.
type FileError struct {
	Path string
	Line int // 0 when unknown
	Key  string
	Err  error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Err.Error())
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// ReadFile reads and checks a config file: its syntax, its keys (an
// unknown key is an error) and the values of every profile.
func ReadFile(path string) (*File, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseFile(path, src)
}

// ParseFile is ReadFile of src, read from path.
func ParseFile(path string, src []byte) (*File, error) {
	f := &File{Path: path, src: src}
	md, err := toml.NewDecoder(strings.NewReader(string(src))).Decode(f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &FileError{Path: path, Line: pe.Position.Line, Key: pe.LastKey, Err: errors.New(pe.Message)}
		}
		// A value of the wrong type: "toml: line N (last key "K"): …".
		if m := decodeErrorRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &FileError{Path: path, Line: line, Key: m[2], Err: errors.New(m[3])}
		}
		return nil, &FileError{Path: path, Err: err}
	}
	if un := md.Undecoded(); len(un) > 0 {
		k := un[0]
		return nil, f.errorAt(k, errors.New("unknown key"))
	}
	if f.LogFormat != "" && f.LogFormat != "text" && f.LogFormat != "json" {
		return nil, f.errorAt(toml.Key{"log_format"}, fmt.Errorf("%q: want \"text\" or \"json\"", f.LogFormat))
	}
	if f.JobLogLevel != "" {
		if _, _, err := ParseJobLogLevel(f.JobLogLevel); err != nil {
			return nil, f.errorAt(toml.Key{"job_log_level"}, err)
		}
	}
	if f.Profile != "" {
		if _, ok := f.Profiles[f.Profile]; !ok {
			return nil, f.errorAt(toml.Key{"profile"}, fmt.Errorf("no profile %q in this file", f.Profile))
		}
	}
	if err := f.checkProfile(nil, f.FileProfile, false); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(f.Profiles)) {
		if err := f.checkProfile(toml.Key{"profiles", name}, f.Profiles[name], true); err != nil {
			return nil, err
		}
		if _, err := f.Config(name); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// decodeErrorRE matches the decoder's errors about a value.
var decodeErrorRE = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// checkProfile checks the values of one profile (or of the top level),
// naming the key of the first bad one.
func (f *File) checkProfile(at toml.Key, p FileProfile, full bool) error {
	key := func(k ...string) toml.Key { return append(slices.Clone(at), k...) }
	switch {
	case p.Concurrency != nil && *p.Concurrency < 1:
		return f.errorAt(key("concurrency"), fmt.Errorf("%d: want at least 1", *p.Concurrency))
	case p.MaxJobs != nil && *p.MaxJobs < 0:
		return f.errorAt(key("max_jobs"), fmt.Errorf("%d: want 0 (no limit) or more", *p.MaxJobs))
	case p.ShutdownTimeout != nil && *p.ShutdownTimeout < 0:
		return f.errorAt(key("shutdown_timeout"), errors.New("want 0 or more"))
	case p.KillGrace != nil && *p.KillGrace < 0:
		return f.errorAt(key("kill_grace"), errors.New("want 0 or more"))
	case p.Lease != nil && *p.Lease <= 0:
		return f.errorAt(key("lease"), errors.New("want a positive duration"))
	case p.Prefetch != nil && *p.Prefetch < 0:
		return f.errorAt(key("prefetch"), fmt.Errorf("%d: want 0 (none) or more", *p.Prefetch))
	}
	seen := map[string]bool{}
	for _, q := range p.Queues {
		if seen[q] {
			return f.errorAt(key("queues"), fmt.Errorf("queue %q is listed twice", q))
		}
		seen[q] = true
	}
	for _, q := range slices.Sorted(maps.Keys(p.Weights)) {
		if len(p.Queues) > 0 && !seen[q] {
			return f.errorAt(key("weights", q), fmt.Errorf("queue %q is not in queues", q))
		}
		if p.Weights[q] < 1 {
			return f.errorAt(key("weights", q), fmt.Errorf("%d: want at least 1", p.Weights[q]))
		}
	}
	for _, q := range slices.Sorted(maps.Keys(p.Max)) {
		if len(p.Queues) > 0 && !seen[q] {
			return f.errorAt(key("max", q), fmt.Errorf("queue %q is not in queues", q))
		}
		if p.Max[q] < 1 {
			return f.errorAt(key("max", q), fmt.Errorf("%d: want at least 1", p.Max[q]))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(p.Handlers)) {
		if err := p.Handlers[t].config("").validate(); err != nil {
			return f.errorAt(key("handlers", t), err)
		}
	}
	return nil
}

// Profiles lists the file's profile names, sorted.
func (f *File) ProfileNames() []string { return slices.Sorted(maps.Keys(f.Profiles)) }

// Config is the Config of the named profile ("" for the file's default
// profile): the top level's values, overridden by the profile's.
func (f *File) Config(profile string) (Config, error) {
	if profile == "" {
		profile = f.Profile
	}
	p := f.FileProfile
	at := toml.Key{}
	if profile != "" {
		own, ok := f.Profiles[profile]
		if !ok {
			names := f.ProfileNames()
			if len(names) == 0 {
				return Config{}, &FileError{Path: f.Path, Err: fmt.Errorf("no profile %q: the file has no [profiles.NAME] tables", profile)}
			}
			return Config{}, &FileError{Path: f.Path, Err: fmt.Errorf("no profile %q; the file has %s", profile, strings.Join(names, ", "))}
		}
		p = mergeProfile(p, own)
		at = toml.Key{"profiles", profile}
	}
	var c Config
	if p.Concurrency != nil {
		c.Concurrency = *p.Concurrency
	}
	if p.MaxJobs != nil {
		c.MaxJobs = *p.MaxJobs
	}
	if p.ShutdownTimeout != nil {
		c.ShutdownTimeout = time.Duration(*p.ShutdownTimeout)
		if c.ShutdownTimeout == 0 {
			c.ShutdownTimeout = -1 // 0 in a file means none
		}
	}
	if p.KillGrace != nil {
		c.KillGrace = time.Duration(*p.KillGrace)
	}
	if p.Lease != nil {
		c.Lease = time.Duration(*p.Lease)
	}
	if p.Prefetch != nil {
		c.Prefetch = *p.Prefetch
		if c.Prefetch == 0 {
			c.Prefetch = -1 // 0 in a file means none
		}
	}
	names := p.Queues
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(p.Weights))
	}
	for _, q := range names {
		c.Queues = append(c.Queues, kyu.PoolQueue{Name: q, Weight: p.Weights[q], Max: p.Max[q]})
	}
	if len(p.Weights) > 0 {
		for _, q := range c.Queues {
			if q.Weight == 0 {
				return Config{}, f.errorAt(append(at, "weights"), fmt.Errorf("queue %q has no weight: give every queue a weight, or none", q.Name))
			}
		}
	}
	c.Handlers = map[string]HandlerConfig{}
	base := filepath.Dir(f.Path)
	for t, h := range p.Handlers {
		c.Handlers[t] = h.config(base)
	}
	// The rest (queue names, the grace against the lease) as Validate
	// checks them, handlers aside: they may come from flags.
	probe := c
	probe.Handlers = map[string]HandlerConfig{"probe": {Shell: "true"}}
	if err := probe.Validate(); err != nil {
		return Config{}, &FileError{Path: f.Path, Line: f.line(at), Key: at.String(), Err: err}
	}
	return c, nil
}

// mergeProfile is base with every field own sets replaced; handlers are
// merged by type.
func mergeProfile(base, own FileProfile) FileProfile {
	if own.Concurrency != nil {
		base.Concurrency = own.Concurrency
	}
	if own.Queues != nil {
		base.Queues = own.Queues
		base.Weights, base.Max = nil, nil
	}
	if own.Weights != nil {
		base.Weights = own.Weights
	}
	if own.Max != nil {
		base.Max = own.Max
	}
	if own.ShutdownTimeout != nil {
		base.ShutdownTimeout = own.ShutdownTimeout
	}
	if own.KillGrace != nil {
		base.KillGrace = own.KillGrace
	}
	if own.MaxJobs != nil {
		base.MaxJobs = own.MaxJobs
	}
	if own.Lease != nil {
		base.Lease = own.Lease
	}
	if own.Prefetch != nil {
		base.Prefetch = own.Prefetch
	}
	h := maps.Clone(base.Handlers)
	if h == nil {
		h = map[string]FileHandler{}
	}
	maps.Copy(h, own.Handlers)
	base.Handlers = h
	return base
}

// config is the HandlerConfig of h, a relative dir taken from base.
func (h FileHandler) config(base string) HandlerConfig {
	dir := h.Dir
	if dir != "" && base != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join(base, dir)
	}
	return HandlerConfig{
		Command: h.Command, Shell: h.Shell, URL: h.URL, Timeout: time.Duration(h.Timeout),
		Prefork: h.Prefork, MaxJobsPerChild: h.MaxJobsPerChild,
		Env: h.Env, Dir: dir,
		Retry: RetryPolicy{
			NoRetry: h.Retry != nil && !*h.Retry, Backoff: h.Backoff,
			BackoffBase: time.Duration(h.BackoffBase), BackoffMax: time.Duration(h.BackoffMax),
		},
	}
}

// errorAt is a FileError about key, at its line when it can be found.
func (f *File) errorAt(key toml.Key, err error) error {
	return &FileError{Path: f.Path, Line: f.line(key), Key: key.String(), Err: err}
}

// line finds the line of key in the file: the line "name = …" under the
// table of its parent (a [table] header, or a key = { inline } line),
// else the header of the table the key names. 0 when not found.
func (f *File) line(key toml.Key) int {
	if len(key) == 0 {
		return 0
	}
	lines := strings.Split(string(f.src), "\n")
	parent, name := key[:len(key)-1], key[len(key)-1]
	var table toml.Key
	for i, raw := range lines {
		l := strings.TrimSpace(raw)
		if strings.HasPrefix(l, "[") {
			table = parseHeader(l)
			if slices.Equal(table, key) {
				return i + 1
			}
			continue
		}
		k, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		k = unquote(strings.TrimSpace(k))
		switch {
		case slices.Equal(table, parent) && k == name:
			return i + 1
		case len(parent) > 0 && slices.Equal(table, parent[:len(parent)-1]) && k == parent[len(parent)-1]:
			// An inline table: name = { … } holding the key.
			return i + 1
		}
	}
	return 0
}

// parseHeader splits a [table] or [[array]] header into its key.
func parseHeader(l string) toml.Key {
	l = strings.Trim(l, "[]")
	if i := strings.Index(l, "#"); i >= 0 && !strings.Contains(l[:i], `"`) {
		l = strings.TrimRight(l[:i], " \t]")
	}
	var key toml.Key
	var cur strings.Builder
	inQuote := false
	for _, r := range l {
		switch {
		case r == '"':
			inQuote = !inQuote
		case r == '.' && !inQuote:
			key = append(key, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(key, strings.TrimSpace(cur.String()))
}

// unquote strips the quotes of a quoted key.
func unquote(k string) string {
	if len(k) >= 2 && (k[0] == '"' || k[0] == '\'') && k[len(k)-1] == k[0] {
		return k[1 : len(k)-1]
	}
	return k
}
