package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Output formats of the operator commands (-o).
const (
	outputTable = "table"
	outputJSON  = "json"
)

// checkOutput refuses an unknown output format.
func checkOutput(format string) (string, error) {
	switch format {
	case outputTable, outputJSON:
		return format, nil
	}
	return "", usageErrorf("-o: %q is not an output format: give table or json", format)
}

// table writes aligned columns for people: a header row, then rows.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table with the given column names.
func newTable(w io.Writer, columns ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(columns...)
	return t
}

// row adds one row; a cell holds no tab or newline.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// writeJSONLine writes v as one line of JSON (JSON lines, for lists).
func writeJSONLine(w io.Writer, v any) error {
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// timeCell shows t in UTC to the second, or "-" when zero.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// durationCell shows d rounded for reading, or "-" when zero.
func durationCell(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// sortedMap yields m's entries by key.
func sortedMap(m map[string]string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// note writes a line for people (to stderr).
func note(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format+"\n", args...)
}
