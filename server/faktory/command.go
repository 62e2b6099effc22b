package faktory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The verbs a connection answers after its handshake.
const (
	verbPush   = "PUSH"
	verbPushB  = "PUSHB"
	verbFetch  = "FETCH"
	verbAck    = "ACK"
	verbFail   = "FAIL"
	verbBeat   = "BEAT"
	verbEnd    = "END"
	verbHello  = "HELLO"
	verbInfo   = "INFO"
	verbQueue  = "QUEUE"
	verbFlush  = "FLUSH"
	verbMutate = "MUTATE"
)

// command is one parsed command line: its verb and its decoded argument.
type command struct {
	verb   string
	hello  helloArgs
	jobs   []wireJob // PUSH: one; PUSHB: the batch
	queues []string  // FETCH
	jid    string    // ACK
	fail   failArgs
	beat   beatArgs
	mutate mutateArgs
	// QUEUE: the subcommand (PAUSE, RESUME, REMOVE, LATENCY) and the queue names
	// ("*" for every queue).
	sub string
}

// helloArgs is what HELLO carries.
type helloArgs struct {
	WID      string   `json:"wid"`
	Hostname string   `json:"hostname"`
	PID      int      `json:"pid"`
	Labels   []string `json:"labels"`
	Version  int      `json:"v"`
	PwdHash  string   `json:"pwdhash"`
}

// failArgs is what FAIL carries.
type failArgs struct {
	JID       string   `json:"jid"`
	ErrType   string   `json:"errtype"`
	Message   string   `json:"message"`
	Backtrace []string `json:"backtrace"`
}

// beatArgs is what BEAT carries.
type beatArgs struct {
	WID          string `json:"wid"`
	CurrentState string `json:"current_state"`
	RSSKB        int64  `json:"rss_kb"`
}

// unknownCommandError names a verb this server does not answer.
type unknownCommandError struct{ verb string }

func (e *unknownCommandError) Error() string { return "Unknown command " + e.verb }

// parseCommand splits a command line into its verb and argument and
// decodes the argument the verb takes. It never executes anything; an
// error is the text of the -ERR answer.
func parseCommand(line string) (command, error) {
	verb, arg, hasArg := strings.Cut(line, " ")
	c := command{verb: verb}
	switch verb {
	case verbEnd, verbInfo, verbFlush:
		if hasArg {
			return c, fmt.Errorf("%s takes no argument", verb)
		}
		return c, nil
	case verbQueue:
		f := strings.Fields(arg)
		if len(f) < 2 {
			return c, errors.New("QUEUE needs a subcommand (PAUSE, RESUME, REMOVE or LATENCY) and queue names or *")
		}
		c.sub, c.queues = strings.ToUpper(f[0]), f[1:]
		switch c.sub {
		case "PAUSE", "RESUME", "REMOVE":
			return c, nil
		case "LATENCY":
			if slices.Contains(c.queues, "*") {
				return c, errors.New("QUEUE LATENCY takes queue names, not *")
			}
			return c, nil
		}
		return c, fmt.Errorf("no such QUEUE subcommand: %s", f[0])
	case verbFetch:
		c.queues = strings.Fields(arg)
		return c, nil
	case verbHello:
		return c, decodeArg(verb, arg, hasArg, &c.hello)
	case verbPush:
		var j wireJob
		if err := decodeArg(verb, arg, hasArg, &j); err != nil {
			return c, err
		}
		c.jobs = []wireJob{j}
		return c, nil
	case verbPushB:
		return c, decodeArg(verb, arg, hasArg, &c.jobs)
	case verbAck:
		var a struct {
			JID *string `json:"jid"`
		}
		if err := decodeArg(verb, arg, hasArg, &a); err != nil {
			return c, err
		}
		if a.JID == nil || *a.JID == "" {
			return c, errors.New("ACK needs a jid")
		}
		c.jid = *a.JID
		return c, nil
	case verbFail:
		if err := decodeArg(verb, arg, hasArg, &c.fail); err != nil {
			return c, err
		}
		if c.fail.JID == "" {
			return c, errors.New("FAIL needs a jid")
		}
		return c, nil
	case verbMutate:
		if err := decodeArg(verb, arg, hasArg, &c.mutate); err != nil {
			return c, err
		}
		return c, c.mutate.check()
	case verbBeat:
		if err := decodeArg(verb, arg, hasArg, &c.beat); err != nil {
			return c, err
		}
		if c.beat.WID == "" {
			return c, errors.New("BEAT needs a wid")
		}
		return c, nil
	}
	return c, &unknownCommandError{verb: verb}
}

// decodeArg decodes a command's JSON argument into v, refusing a missing
// argument and anything after the JSON value.
func decodeArg(verb, arg string, hasArg bool, v any) error {
	if !hasArg || strings.TrimSpace(arg) == "" {
		return fmt.Errorf("%s needs a JSON argument", verb)
	}
	dec := json.NewDecoder(strings.NewReader(arg))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: invalid JSON: %w", verb, err)
	}
	if strings.TrimSpace(arg[dec.InputOffset():]) != "" {
		return fmt.Errorf("%s: invalid JSON: text after the value", verb)
	}
	return nil
}

// compactJSON returns raw without insignificant white space.
func compactJSON(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
