package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// roundMark is the line run.sh writes into the results file as a round
// starts.
type roundMark struct {
	Round int    `json:"round"`
	Load  string `json:"load"`
	Time  string `json:"time"`
}

// figure is one row of a table: how to read it from a result, how to
// print it, and whether more is better.
type figure struct {
	name   string
	value  func(result) (float64, bool)
	format func(float64) string
	more   bool
}

var figures = []figure{
	{"batch enqueue (jobs/s)", func(r result) (float64, bool) {
		if r.BatchPerSec == nil {
			return 0, false
		}
		return *r.BatchPerSec, true
	}, thousands, true},
	{"single enqueue, 1 producer (jobs/s)", func(r result) (float64, bool) { return r.SinglePerSec, true }, thousands, true},
	{"drain (jobs/s)", func(r result) (float64, bool) { return r.DrainPerSec, true }, thousands, true},
	{"idle latency p50 (ms)", func(r result) (float64, bool) { return r.P50ms, true }, millis, false},
	{"idle latency p99 (ms)", func(r result) (float64, bool) { return r.P99ms, true }, millis, false},
}

// stores are the tables, in order, with their names.
var stores = []struct{ key, title string }{
	{"redis", "Redis"}, {"postgres", "PostgreSQL"}, {"embedded", "Embedded store"},
}

// table prints one Markdown table per store from a results file: kyu's
// figures beside each peer's, round by round, with kyu's lead as a ratio.
func table(args []string) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: peers table RESULTS.jsonl")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	results, marks, err := readResults(f)
	if err != nil {
		return err
	}
	writeTables(os.Stdout, results, marks)
	return nil
}

// readResults reads the results file: result lines and round marks.
func readResults(rd io.Reader) ([]result, []roundMark, error) {
	var results []result
	var marks []roundMark
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, nil, fmt.Errorf("results: %w: %s", err, line)
		}
		if r.System == "" {
			var m roundMark
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return nil, nil, err
			}
			marks = append(marks, m)
			continue
		}
		results = append(results, r)
	}
	return results, marks, sc.Err()
}

func writeTables(w io.Writer, results []result, marks []roundMark) {
	if len(results) > 0 {
		r := results[0]
		fmt.Fprintf(w, "%d jobs of 100 bytes per figure; batches of %d; drain with %d handlers; idle latency with %d handlers, %d samples.\n",
			r.Jobs, r.Batch, r.Drain, r.Idle, r.Samples)
	}
	for _, m := range marks {
		fmt.Fprintf(w, "Round %d started %s, load average %s.\n", m.Round, m.Time, m.Load)
	}
	fmt.Fprintln(w, "Each cell lists the rounds in order. Ratios: kyu's figure over the peer's for throughputs, the peer's over kyu's for latencies; above 1, kyu is ahead.")
	for _, st := range stores {
		var kyu []result
		peers := map[string][]result{}
		var order []string
		for _, r := range results {
			switch {
			case r.Store != st.key:
			case r.System == "kyu":
				kyu = append(kyu, r)
			default:
				if _, ok := peers[r.System]; !ok {
					order = append(order, r.System)
				}
				peers[r.System] = append(peers[r.System], r)
			}
		}
		if len(kyu) == 0 && len(order) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n\n", st.title)
		head := []string{"figure", label(kyu, "kyu")}
		for _, p := range order {
			head = append(head, label(peers[p], p), "kyu ÷ "+p)
		}
		fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
		fmt.Fprintln(w, strings.Repeat("|---", len(head))+"|")
		for _, fg := range figures {
			row := []string{fg.name, cells(kyu, fg)}
			for _, p := range order {
				row = append(row, cells(peers[p], fg), ratios(kyu, peers[p], fg))
			}
			fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
		}
	}
}

// label names a column by its system and version.
func label(rs []result, system string) string {
	if len(rs) == 0 || rs[0].Version == "" {
		return system
	}
	return system + " " + rs[0].Version
}

// byRound returns rs's figure by round.
func byRound(rs []result, fg figure) map[int]float64 {
	m := map[int]float64{}
	for _, r := range rs {
		if v, ok := fg.value(r); ok {
			m[r.Round] = v
		}
	}
	return m
}

func cells(rs []result, fg figure) string {
	m := byRound(rs, fg)
	if len(m) == 0 {
		return "—"
	}
	var out []string
	for _, round := range sortedKeys(m) {
		out = append(out, fg.format(m[round]))
	}
	return strings.Join(out, " · ")
}

func ratios(kyu, peer []result, fg figure) string {
	k, p := byRound(kyu, fg), byRound(peer, fg)
	var out []string
	for _, round := range sortedKeys(k) {
		pv, ok := p[round]
		if !ok || pv == 0 || k[round] == 0 {
			continue
		}
		r := k[round] / pv
		if !fg.more {
			r = pv / k[round]
		}
		out = append(out, strconv.FormatFloat(r, 'f', 2, 64))
	}
	if len(out) == 0 {
		return "—"
	}
	return strings.Join(out, " · ")
}

func sortedKeys(m map[int]float64) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// thousands formats v as a whole number with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func millis(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
