package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf16"
	"unicode/utf8"
)

// Output formats of the client commands.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// The CLI prints what the registry holds, which any client (or an older version with
// looser rules) may have filled with anything. Nothing from it reaches the terminal as a
// character the terminal could act on or hide: control characters (escape sequences
// among them), bidi controls, zero-width characters and invalid UTF-8 are printed
// escaped, as Go quotes them (\x1b, \u202e, \xff).

// safeText returns s with every character strconv.IsPrint refuses (everything but
// letters, marks, numbers, punctuation, symbols and the ASCII space), and every byte
// that is not UTF-8, replaced by its Go escape.
func safeText(s string) string {
	if isSafeText(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+w])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += w
	}
	return b.String()
}

func isSafeText(s string) bool {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && w == 1) || !strconv.IsPrint(r) {
			return false
		}
		i += w
	}
	return true
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSONText(buf.Bytes()))
	return err
}

// writeJSONLine prints v as JSON on one line.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(escapeJSONText(b), '\n'))
	return err
}

// escapeJSONText rewrites the characters encoding/json leaves as they are although a
// terminal could act on or hide them — DEL, the C1 controls, bidi and zero-width
// characters and the other runes strconv.IsPrint refuses — as \u escapes, and any byte
// that is not UTF-8 as \ufffd (what a decoder reads it as). encoding/json writes every
// other character outside the printable ASCII range only inside strings, where a \u
// escape means the same character, so the JSON is unchanged for a decoder.
func escapeJSONText(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		c := b[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' || c == '\r' {
			if out != nil {
				out = append(out, c)
			}
			i++
			continue
		}
		r, w := utf8.DecodeRune(b[i:]) // a byte that is not UTF-8 is U+FFFD, width 1
		if !(r == utf8.RuneError && w == 1) && strconv.IsPrint(r) {
			if out != nil {
				out = append(out, b[i:i+w]...)
			}
			i += w
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+16), b[:i]...)
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += w
	}
	if out == nil {
		return b
	}
	return out
}

// table prints aligned columns; every cell is printed through safeText (a tab or a
// newline in a cell would break the columns, an escape sequence the terminal).
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) {
	safe := make([]string, len(cols))
	for i, c := range cols {
		safe[i] = safeText(c)
	}
	fmt.Fprintln(t.tw, strings.Join(safe, "\t"))
}

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
		parts[i] = safeText(k) + "=" + safeText(md[k])
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
