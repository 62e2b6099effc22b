package faktory

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/kyuhq/kyu/backend"
)

// Metadata keys that keep the Faktory fields kyu has no field for, so a
// job pushed over FWP is handed out by FETCH as it was pushed.
const (
	// MetaCustom holds the job's custom object as JSON text.
	MetaCustom = "faktory:custom"
	// MetaCreatedAt holds the created_at the client gave, as given.
	MetaCreatedAt = "faktory:created_at"
	// MetaBacktrace holds the backtrace line count the client asked for.
	MetaBacktrace = "faktory:backtrace"
)

// Faktory's defaults for a pushed job.
const (
	defaultRetry      = 25
	defaultReserveFor = 1800 // seconds
	defaultPriority   = 5
	// priorityStep maps Faktory's priorities 1-9 onto kyu's [-100, 100]:
	// kyu priority = (p-5) * priorityStep, so 5 is kyu's 0.
	priorityStep = 25
)

// wireJob is a Faktory job as it travels in PUSH, PUSHB and FETCH.
type wireJob struct {
	JID        string          `json:"jid"`
	Type       string          `json:"jobtype"`
	Args       json.RawMessage `json:"args"`
	Queue      string          `json:"queue,omitempty"`
	At         string          `json:"at,omitempty"`
	Retry      *int            `json:"retry,omitempty"`
	ReserveFor int             `json:"reserve_for,omitempty"`
	Priority   int             `json:"priority,omitempty"`
	Custom     json.RawMessage `json:"custom,omitempty"`
	Backtrace  int             `json:"backtrace,omitempty"`
	CreatedAt  string          `json:"created_at,omitempty"`
	EnqueuedAt string          `json:"enqueued_at,omitempty"`
	Failure    *wireFailure    `json:"failure,omitempty"`
}

// wireFailure is the latest failure of a job handed out by FETCH.
type wireFailure struct {
	RetryCount int      `json:"retry_count"`
	Remaining  int      `json:"remaining"`
	FailedAt   string   `json:"failed_at"`
	Message    string   `json:"message,omitempty"`
	ErrType    string   `json:"errtype,omitempty"`
	Backtrace  []string `json:"backtrace,omitempty"`
}

// newJob maps a pushed Faktory job onto a kyu job (see docs/faktory.md).
func (w *wireJob) newJob() (backend.NewJob, error) {
	j := backend.NewJob{Type: w.Type, Queue: w.Queue, JID: w.JID}
	if j.Queue == "" {
		j.Queue = backend.DefaultQueue
	}
	args := strings.TrimSpace(string(w.Args))
	if !strings.HasPrefix(args, "[") {
		return j, errors.New("jobs must have args, a JSON array")
	}
	j.Payload = []byte(w.Args)

	retry := defaultRetry
	if w.Retry != nil {
		retry = *w.Retry
	}
	switch {
	case retry > math.MaxInt32:
		return j, fmt.Errorf("retry %d is too large", retry)
	case retry > 0:
		j.MaxAttempts = retry + 1
	case retry == 0:
		// One attempt, and a failed job is not kept, as Faktory drops it.
		j.MaxAttempts = 1
		j.Retention = backend.RetainNone
	default:
		// One attempt, and the failed job is kept (Faktory's dead set).
		j.MaxAttempts = 1
	}

	reserve := w.ReserveFor
	switch {
	case reserve < 0:
		return j, fmt.Errorf("reserve_for %d is negative", reserve)
	case reserve == 0:
		reserve = defaultReserveFor
	case reserve > math.MaxInt32:
		return j, fmt.Errorf("reserve_for %d is too large", reserve)
	}
	j.Timeout = time.Duration(reserve) * time.Second

	switch p := w.Priority; {
	case p == 0:
	case p < 1 || p > 9:
		return j, fmt.Errorf("priority %d is outside 1-9", p)
	default:
		j.Priority = (p - defaultPriority) * priorityStep
	}

	if w.At != "" {
		at, err := time.Parse(time.RFC3339Nano, w.At)
		if err != nil {
			return j, fmt.Errorf("at %q is not an RFC 3339 time", w.At)
		}
		j.RunAt = at
	}

	meta := map[string]string{}
	if c := strings.TrimSpace(string(w.Custom)); c != "" && c != "null" {
		if !strings.HasPrefix(c, "{") {
			return j, errors.New("custom must be a JSON object")
		}
		compact, err := compactJSON(w.Custom)
		if err != nil {
			return j, fmt.Errorf("custom: %w", err)
		}
		meta[MetaCustom] = string(compact)
	}
	if w.CreatedAt != "" {
		meta[MetaCreatedAt] = w.CreatedAt
	}
	if w.Backtrace != 0 {
		meta[MetaBacktrace] = strconv.Itoa(w.Backtrace)
	}
	if len(meta) > 0 {
		j.Metadata = meta
	}
	return j, nil
}

// wireOf maps a kyu job back to the Faktory job FETCH hands out: the
// inverse of newJob for a job pushed over FWP, and a faithful rendering
// of a job enqueued through kyu (its kyu id as jid, its payload as args).
func wireOf(j *backend.Job) wireJob {
	w := wireJob{
		JID:        j.JID,
		Type:       j.Type,
		Args:       argsOf(j.Payload),
		Queue:      j.Queue,
		ReserveFor: int((j.Timeout + time.Second - 1) / time.Second),
		EnqueuedAt: j.RunAt.UTC().Format(time.RFC3339Nano),
		CreatedAt:  j.CreatedAt.UTC().Format(time.RFC3339Nano),
	}
	if w.JID == "" {
		w.JID = j.ID
	}
	retry := j.MaxAttempts - 1
	if retry == 0 && j.Retention != backend.RetainNone {
		retry = -1
	}
	w.Retry = &retry
	if j.Priority != 0 {
		w.Priority = priorityOf(j.Priority)
	}
	if c, ok := j.Metadata[MetaCustom]; ok && json.Valid([]byte(c)) {
		w.Custom = json.RawMessage(c)
	} else if custom := plainMetadata(j.Metadata); custom != nil {
		w.Custom = custom
	}
	if c, ok := j.Metadata[MetaCreatedAt]; ok {
		w.CreatedAt = c
	}
	if b, err := strconv.Atoi(j.Metadata[MetaBacktrace]); err == nil {
		w.Backtrace = b
	}
	w.Failure = failureOf(j, retry)
	return w
}

// priorityOf maps a kyu priority onto Faktory's 1-9, exactly inverting
// newJob's map and rounding others to the nearest step.
func priorityOf(p int) int {
	f := defaultPriority + int(math.Round(float64(p)/priorityStep))
	return min(max(f, 1), 9)
}

// argsOf turns a payload into Faktory's args: a JSON array as it is,
// another JSON value as a one-element array, other bytes as one string,
// nothing as [].
func argsOf(payload []byte) json.RawMessage {
	s := strings.TrimSpace(string(payload))
	switch {
	case s == "":
		return json.RawMessage("[]")
	case strings.HasPrefix(s, "[") && json.Valid(payload):
		return json.RawMessage(payload)
	case json.Valid(payload):
		return json.RawMessage("[" + s + "]")
	}
	b, _ := json.Marshal([]string{string(payload)})
	return b
}

// plainMetadata renders a kyu job's own metadata (no Faktory keys) as a
// custom object, or nil when it has none.
func plainMetadata(m map[string]string) json.RawMessage {
	plain := map[string]string{}
	for k, v := range m {
		if !strings.HasPrefix(k, "faktory:") {
			plain[k] = v
		}
	}
	if len(plain) == 0 {
		return nil
	}
	b, _ := json.Marshal(plain)
	return b
}

// failureOf renders the job's latest failed attempt, or nil.
func failureOf(j *backend.Job, retry int) *wireFailure {
	if len(j.Errors) == 0 {
		return nil
	}
	e := j.Errors[len(j.Errors)-1]
	failed := 0
	for _, a := range j.Errors {
		if a.Kind != backend.AttemptInterrupted {
			failed++
		}
	}
	f := &wireFailure{
		RetryCount: failed - 1,
		Remaining:  max(retry-(failed-1), 0),
		FailedAt:   e.At.UTC().Format(time.RFC3339Nano),
		Message:    e.Message,
	}
	if t, m, ok := strings.Cut(e.Message, ": "); ok && !strings.ContainsAny(t, " \n") {
		f.ErrType, f.Message = t, m
	}
	if e.Stack != "" {
		f.Backtrace = strings.Split(e.Stack, "\n")
	}
	return f
}

// failMessage is the attempt error's message for a FAIL: "errtype:
// message", cut to what a store keeps.
func failMessage(f failArgs) (message, stack string) {
	message = f.Message
	if f.ErrType != "" {
		message = f.ErrType + ": " + f.Message
	}
	message = backend.TruncateText(backend.TextOf(message), backend.MaxFailMessage)
	stack = backend.TruncateText(backend.TextOf(strings.Join(f.Backtrace, "\n")), backend.MaxFailStack)
	return message, stack
}
