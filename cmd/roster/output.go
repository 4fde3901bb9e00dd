package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Output formats of the client commands.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) { fmt.Fprintln(t.tw, strings.Join(cols, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// formatMeta prints a metadata map as sorted k=v pairs, "-" when empty.
func formatMeta(md map[string]string) string {
	if len(md) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + md[k]
	}
	return strings.Join(parts, ",")
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
