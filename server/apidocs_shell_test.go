package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docShell replays the shell examples of docs/api.md with net/http, so the
// test needs neither curl nor jq. It reads these forms, and fails the test
// on anything else:
//
//	curl [-s] [-N] [-X METHOD] [-H 'K: V']... [-d BODY] URL   [# STATUS]
//	NAME=$(curl …)                     the answer's body
//	NAME=$(curl … | jq -r PATH)        one value of the answer
//	NAME=$(echo "$VAR" | jq -r PATH)   one value of an earlier answer
//
// Words are quoted as in sh ('…' literal, "…" with $NAME expanded); PATH is
// a jq path such as .id or '.jobs[0].lease_token'. A command without a
// STATUS comment must answer 2xx.
type docShell struct {
	t      *testing.T
	vars   map[string]string
	hc     *http.Client
	called map[string]bool
}

func newDocShell(t *testing.T, vars map[string]string) *docShell {
	return &docShell{t: t, vars: vars, hc: &http.Client{Timeout: 30 * time.Second}, called: map[string]bool{}}
}

var (
	assignForm = regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=\$\((.*)\)$`)
	jqForm     = regexp.MustCompile(`^(.*?)\s*\|\s*jq -r (\S+)$`)
	statusNote = regexp.MustCompile(`^(\d{3})\b`)
)

// run runs one command of the block that starts at line of the page.
func (s *docShell) run(line int, cmd string) {
	s.t.Helper()
	fail := func(format string, args ...any) {
		s.t.Helper()
		s.t.Fatalf("docs/api.md block at line %d: %s\n  %s", line, fmt.Sprintf(format, args...), cmd)
	}
	code, comment := splitComment(cmd)
	want := 0
	if m := statusNote.FindStringSubmatch(strings.TrimSpace(comment)); m != nil {
		want, _ = strconv.Atoi(m[1])
	}

	name, expr := "", code
	if m := assignForm.FindStringSubmatch(code); m != nil {
		name, expr = m[1], m[2]
	}
	path := ""
	if m := jqForm.FindStringSubmatch(expr); m != nil {
		expr, path = m[1], m[2]
	}
	words, err := s.words(expr)
	if err != nil {
		fail("%v", err)
	}
	var out string
	switch {
	case len(words) == 2 && words[0] == "echo" && path != "":
		out = words[1]
	case len(words) > 0 && words[0] == "curl":
		body, err := s.curl(words[1:], want)
		if err != nil {
			fail("%v", err)
		}
		out = body
	default:
		fail("not a form the test knows (see docShell)")
	}
	if path != "" {
		v, err := jqPath(out, strings.Trim(path, `'"`))
		if err != nil {
			fail("jq -r %s: %v (answer %s)", path, err, out)
		}
		out = v
	}
	if name != "" {
		s.vars[name] = out
	}
}

// curl makes the request the curl arguments describe and checks its
// status: want, or 2xx when want is 0. It returns the answer's body, or ""
// for an event stream (closed once its status is in).
func (s *docShell) curl(args []string, want int) (string, error) {
	method, url := "", ""
	var body *string
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("curl %s wants a value", a)
			}
			i++
			return args[i], nil
		}
		switch a {
		case "-s", "-N", "-sN", "-sS":
		case "-X":
			v, err := next()
			if err != nil {
				return "", err
			}
			method = v
		case "-H":
			v, err := next()
			if err != nil {
				return "", err
			}
			k, val, ok := strings.Cut(v, ":")
			if !ok {
				return "", fmt.Errorf("header %q has no colon", v)
			}
			header.Add(strings.TrimSpace(k), strings.TrimSpace(val))
		case "-d":
			v, err := next()
			if err != nil {
				return "", err
			}
			body = &v
		default:
			if strings.HasPrefix(a, "-") || url != "" {
				return "", fmt.Errorf("curl argument %q: not one the test knows", a)
			}
			url = a
		}
	}
	if method == "" {
		method = http.MethodGet
		if body != nil {
			method = http.MethodPost
		}
	}
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(*body)
		if header.Get("Content-Type") == "" {
			// What curl -d sends; the server refuses it (415).
			header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return "", err
	}
	req.Header = header
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	s.called[method+" "+routePattern(req.URL.Path)] = true
	var out []byte
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		if out, err = io.ReadAll(resp.Body); err != nil {
			return "", err
		}
	}
	ok := resp.StatusCode == want || want == 0 && resp.StatusCode/100 == 2
	if !ok {
		wanted := "2xx"
		if want != 0 {
			wanted = strconv.Itoa(want)
		}
		return "", fmt.Errorf("%s %s answered %d, want %s: %s", method, url, resp.StatusCode, wanted, bytes.TrimSpace(out))
	}
	if err := batchFailures(out); err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	return string(bytes.TrimSpace(out)), nil
}

// batchFailures reports the first item of a batch answer
// ({"results":[…]}) that did not succeed: such an answer is 200 whatever
// its items did.
func batchFailures(body []byte) error {
	var batch struct {
		Results []struct {
			OK    bool            `json:"ok"`
			Error json.RawMessage `json:"error"`
		} `json:"results"`
	}
	if json.Unmarshal(body, &batch) != nil {
		return nil
	}
	for i, r := range batch.Results {
		if !r.OK {
			return fmt.Errorf("item %d failed: %s", i, r.Error)
		}
	}
	return nil
}

// routePattern names the documented route that path belongs to, or path
// itself.
func routePattern(path string) string {
	// A literal route (/api/v1/jobs/bulk) wins over a pattern that a
	// placeholder would fit (/api/v1/jobs/{id}), as in http.ServeMux.
	for _, r := range documentedRoutes {
		if _, pattern, _ := strings.Cut(r, " "); pattern == path {
			return pattern
		}
	}
	segs := strings.Split(path, "/")
	for _, r := range documentedRoutes {
		_, pattern, _ := strings.Cut(r, " ")
		ps := strings.Split(pattern, "/")
		if len(ps) != len(segs) {
			continue
		}
		match := true
		for i := range ps {
			if ps[i] != segs[i] && !strings.HasPrefix(ps[i], "{") {
				match = false
				break
			}
		}
		if match {
			return pattern
		}
	}
	return path
}

// splitComment cuts a command at its first unquoted " #".
func splitComment(cmd string) (code, comment string) {
	quote := byte(0)
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || cmd[i-1] == ' ' || cmd[i-1] == '\t'):
			return strings.TrimSpace(cmd[:i]), cmd[i+1:]
		}
	}
	return strings.TrimSpace(cmd), ""
}

// words splits a command into words as sh does for the quoting the page
// uses, expanding $NAME and ${NAME} outside single quotes. A name with no
// value is an error, not an empty word.
func (s *docShell) words(cmd string) ([]string, error) {
	var out []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(cmd[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ' quote")
			}
			w.WriteString(cmd[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(cmd) && cmd[i] != '"'; i++ {
				switch {
				case cmd[i] == '\\' && i+1 < len(cmd) && strings.IndexByte(`"\$`, cmd[i+1]) >= 0:
					i++
					w.WriteByte(cmd[i])
				case cmd[i] == '$':
					n, err := s.expand(cmd[i:], &w)
					if err != nil {
						return nil, err
					}
					i += n - 1
				default:
					w.WriteByte(cmd[i])
				}
			}
			if i >= len(cmd) {
				return nil, fmt.Errorf(`unclosed " quote`)
			}
			inWord = true
		case c == '$':
			n, err := s.expand(cmd[i:], &w)
			if err != nil {
				return nil, err
			}
			i += n - 1
			inWord = true
		case strings.IndexByte("|;&<>`()\\", c) >= 0:
			return nil, fmt.Errorf("%q outside quotes: not a form the test knows", c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, w.String())
	}
	return out, nil
}

var varRef = regexp.MustCompile(`^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})`)

// expand writes the value of the variable s starts with and returns how
// many bytes its reference took.
func (s *docShell) expand(src string, w *strings.Builder) (int, error) {
	m := varRef.FindStringSubmatch(src)
	if m == nil {
		return 0, fmt.Errorf("a $ that names no variable: %q", src)
	}
	name := m[1] + m[2]
	v, ok := s.vars[name]
	if !ok {
		return 0, fmt.Errorf("$%s is not set by an earlier example", name)
	}
	w.WriteString(v)
	return len(m[0]), nil
}

var jqStep = regexp.MustCompile(`^(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\])`)

// jqPath answers what `jq -r path` prints for a path of fields and array
// indexes (.jobs[0].id): a string raw, anything else as JSON.
func jqPath(doc, path string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	for rest := path; rest != "" && rest != "."; {
		m := jqStep.FindStringSubmatch(rest)
		if m == nil {
			return "", fmt.Errorf("path %q: not a form the test knows", path)
		}
		rest = rest[len(m[0]):]
		if m[1] != "" {
			obj, ok := v.(map[string]any)
			if !ok {
				return "", fmt.Errorf("path %q: .%s of a non-object", path, m[1])
			}
			if v, ok = obj[m[1]]; !ok {
				return "", fmt.Errorf("path %q: no field %s", path, m[1])
			}
			continue
		}
		arr, ok := v.([]any)
		n, _ := strconv.Atoi(m[2])
		if !ok || n >= len(arr) {
			return "", fmt.Errorf("path %q: no item [%d]", path, n)
		}
		v = arr[n]
	}
	if str, ok := v.(string); ok {
		return str, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}
