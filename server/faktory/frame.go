package faktory

import (
	"bufio"
	"errors"
	"strconv"
	"strings"
)

// errLineTooLong reports a command line over the limit; the reader has
// skipped it to its end and stays in step with the client.
var errLineTooLong = errors.New("command line too long")

// readLine reads one command line without its line end. A line longer
// than max bytes is read to its end and dropped (it is never held whole)
// and reported as errLineTooLong.
func readLine(r *bufio.Reader, max int) (string, error) {
	var buf []byte
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > max+2 { // +2: the line end is not counted
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			if tooLong {
				return "", errLineTooLong
			}
			s := strings.TrimSuffix(string(buf), "\n")
			s = strings.TrimSuffix(s, "\r")
			if len(s) > max {
				return "", errLineTooLong
			}
			return s, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return "", err
		}
	}
}

// replies writes RESP answers to a buffered writer; each answer is
// flushed as it is written, since the client waits for it.
type replies struct {
	w *bufio.Writer
}

// ok writes +OK.
func (r replies) ok() error { return r.simple("OK") }

// simple writes a simple string.
func (r replies) simple(s string) error {
	r.w.WriteByte('+')
	r.w.WriteString(oneLine(s))
	r.w.WriteString("\r\n")
	return r.w.Flush()
}

// err writes an error answer: code is ERR, or a code Faktory's clients
// know (NOTUNIQUE).
func (r replies) err(code, msg string) error {
	r.w.WriteByte('-')
	r.w.WriteString(code)
	r.w.WriteByte(' ')
	r.w.WriteString(oneLine(msg))
	r.w.WriteString("\r\n")
	return r.w.Flush()
}

// bulk writes a bulk string; nil writes the nil answer $-1.
func (r replies) bulk(b []byte) error {
	if b == nil {
		r.w.WriteString("$-1\r\n")
		return r.w.Flush()
	}
	r.w.WriteByte('$')
	r.w.WriteString(strconv.Itoa(len(b)))
	r.w.WriteString("\r\n")
	r.w.Write(b)
	r.w.WriteString("\r\n")
	return r.w.Flush()
}

// oneLine keeps an answer on one line: CR and LF become spaces.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
