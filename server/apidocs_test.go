package server_test

import (
	"os"
	"strings"
	"testing"

	"github.com/kyuhq/kyu/server"
)

// TestAPIDocExamples runs every ```sh example of docs/api.md, in the order
// of the page, against a server over a fresh embedded store, so the
// examples cannot rot: each curl must answer 2xx, or the status written in
// a comment after it (`# 409`). The examples are replayed with net/http by
// docShell, which reads the few shell forms the page uses (see there).
func TestAPIDocExamples(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(string(page))
	if len(blocks) == 0 {
		t.Fatal("docs/api.md has no ```sh examples")
	}

	// The examples run as a user on this machine would: no token.
	e := newEnv(t, func(c *server.Config) { c.Token = "" })

	sh := newDocShell(t, map[string]string{"KYU": e.base})
	for _, b := range blocks {
		for _, cmd := range b.commands {
			sh.run(b.line, cmd)
		}
	}
	for _, route := range documentedRoutes {
		if !sh.called[route] {
			t.Errorf("docs/api.md has no example of %s", route)
		}
	}
}

// documentedRoutes are the routes every one of which needs an example; a
// call counts for its method and path pattern (an id or a name as a
// {placeholder}).
var documentedRoutes = []string{
	"POST /api/v1/jobs", "GET /api/v1/jobs", "GET /api/v1/jobs/{id}", "DELETE /api/v1/jobs/{id}",
	"GET /api/v1/jobs/{id}/wait", "POST /api/v1/jobs/{id}/retry", "POST /api/v1/jobs/{id}/cancel",
	"POST /api/v1/jobs/{id}/run", "POST /api/v1/jobs/bulk", "POST /api/v1/jobs/import",
	"POST /api/v1/claim", "POST /api/v1/jobs/{id}/heartbeat", "POST /api/v1/jobs/{id}/complete",
	"POST /api/v1/jobs/{id}/fail", "POST /api/v1/jobs/{id}/release", "POST /api/v1/jobs/{id}/progress",
	"POST /api/v1/jobs/{id}/log",
	"POST /api/v1/leases/heartbeat", "POST /api/v1/leases/complete", "POST /api/v1/leases/fail",
	"POST /api/v1/leases/release", "POST /api/v1/leases/report",
	"GET /api/v1/queues", "PATCH /api/v1/queues/{name}", "POST /api/v1/queues/{name}/pause",
	"POST /api/v1/queues/{name}/resume", "POST /api/v1/queues/{name}/retry", "DELETE /api/v1/queues/{name}/jobs",
	"GET /api/v1/stats", "GET /api/v1/workers", "PUT /api/v1/workers/{id}", "DELETE /api/v1/workers/{id}",
	"POST /api/v1/workers/{id}/quiet", "POST /api/v1/workers/{id}/stop", "GET /api/v1/periodic",
	"POST /api/v1/maintenance/{step}", "GET /api/v1/events", "GET /api/v1/wakeups",
	"GET /api/v1/openapi.json", "GET /metrics", "GET /healthz", "GET /readyz",
}

// shellBlock is one ```sh block of a page: the line it starts on and its
// commands, continuation lines joined, comment and blank lines dropped.
type shellBlock struct {
	line     int
	commands []string
}

// shellBlocks returns the ```sh blocks of a Markdown page in order.
func shellBlocks(page string) []shellBlock {
	var out []shellBlock
	var cur *shellBlock
	var pending string
	for i, line := range strings.Split(page, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur = &shellBlock{line: i + 1}
		case cur == nil:
		case strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur, pending = nil, ""
		case strings.HasSuffix(line, `\`):
			pending += strings.TrimSuffix(line, `\`)
		default:
			cmd := strings.TrimSpace(pending + line)
			pending = ""
			if cmd != "" && !strings.HasPrefix(cmd, "#") {
				cur.commands = append(cur.commands, cmd)
			}
		}
	}
	return out
}
