package faktory

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"
)

// conn is one client connection after accept.
type conn struct {
	l   *Listener
	nc  net.Conn
	in  *bufio.Reader
	out replies
	// wid is the worker id HELLO gave ("" for a producer).
	wid string
	// member is its place in the fetch group of its last FETCH.
	member fetchMember
}

// serve runs the handshake and then one command at a time until END,
// an error on the connection or shutdown.
func (l *Listener) serve(nc net.Conn) {
	c := &conn{l: l, nc: nc, in: bufio.NewReaderSize(nc, 64<<10), out: replies{w: bufio.NewWriterSize(nc, 16<<10)}}
	defer c.close()
	h, err := c.handshake()
	if err != nil {
		l.log.Debug("kyu faktory: handshake", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	if h.WID != "" {
		if err := l.workers.hello(l.ctx, h, l.cfg.Now()); err != nil {
			l.workers.gone(context.WithoutCancel(l.ctx), h.WID)
			c.out.err("ERR", err.Error())
			return
		}
		c.wid = h.WID
	}
	if c.out.ok() != nil {
		return
	}
	for {
		if l.isStopping() {
			return
		}
		line, err := readLine(c.in, l.cfg.MaxLine)
		if errors.Is(err, errLineTooLong) {
			if c.out.err("ERR", "command line over the limit of "+itoa(l.cfg.MaxLine)+" bytes") != nil {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		cmd, err := parseCommand(line)
		if err != nil {
			if c.out.err("ERR", err.Error()) != nil {
				return
			}
			continue
		}
		if cmd.verb == verbEnd {
			return
		}
		l.commands.Add(1)
		if c.dispatch(cmd) != nil {
			return
		}
	}
}

// dispatch runs one parsed command and writes its answer; an error is
// the connection's, and ends it.
func (c *conn) dispatch(cmd command) error {
	ctx := c.l.ctx
	switch cmd.verb {
	case verbHello:
		return c.out.err("ERR", "HELLO: already identified")
	case verbPush:
		return c.push(ctx, cmd.jobs[0])
	case verbPushB:
		return c.pushBatch(ctx, cmd.jobs)
	case verbFetch:
		return c.fetch(ctx, cmd.queues)
	case verbAck:
		return c.ack(ctx, cmd.jid)
	case verbFail:
		return c.failJob(ctx, cmd.fail)
	case verbBeat:
		return c.beat(ctx, cmd.beat)
	case verbInfo:
		return c.info(ctx)
	case verbQueue:
		return c.queue(ctx, cmd.sub, cmd.queues)
	case verbFlush:
		return c.flush(ctx)
	case verbMutate:
		return c.mutate(ctx, cmd.mutate)
	}
	return c.out.err("ERR", (&unknownCommandError{verb: cmd.verb}).Error())
}

// close ends the connection: its place in its fetch group, its share of
// the worker's registry entry.
func (c *conn) close() {
	c.l.fetches.part(&c.member)
	if c.wid != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.l.workers.gone(ctx, c.wid); err != nil {
			c.l.log.Warn("kyu faktory: deregister worker", "wid", c.wid, "err", err)
		}
	}
}

// errText is the text of an error answer: kyu's errors without their
// "kyu: " prefix.
func errText(err error) string {
	return strings.TrimPrefix(err.Error(), "kyu: ")
}

// itoa formats an int.
func itoa(n int) string { return strconv.Itoa(n) }
