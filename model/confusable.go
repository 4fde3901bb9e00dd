package model

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Confusable service names. A name that mixes the letters of several scripts
// ("оrders" with a Cyrillic о) or holds fullwidth forms ("ｏrders") can look like
// another service's name while being a different one, so that a consumer reading a
// list, a log or a console page takes one for the other. Such names break no rule
// (Validate*, Admit*): the registry accepts them, logs a warning, and refuses them only
// on a server started with --refuse-confusable-names (registry.Config). This is a rule
// of the node that admits a write, never of the state machine.

// scriptTables are the scripts a letter is classified into, in name order, without
// Common and Inherited (digits, punctuation and combining marks, which every script
// uses).
var scriptTables = func() []scriptTable {
	var out []scriptTable
	for name, t := range unicode.Scripts {
		if name != "Common" && name != "Inherited" {
			out = append(out, scriptTable{name, t})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}()

type scriptTable struct {
	name  string
	table *unicode.RangeTable
}

// scriptOf is the script of letter r ("" when it belongs to none but Common).
func scriptOf(r rune) string {
	// The common cases first.
	for _, t := range []scriptTable{{"Latin", unicode.Latin}, {"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek}} {
		if unicode.Is(t.table, r) {
			return t.name
		}
	}
	for _, t := range scriptTables {
		if unicode.Is(t.table, r) {
			return t.name
		}
	}
	return ""
}

// allowedMixes are the sets of scripts written together that count as one, as in
// Unicode's "highly restrictive" profile (UTS #39, section 5.2): Latin with Han and
// the Japanese kana, with Han and Bopomofo, or with Han and Hangul. Every other mix of
// scripts, Latin with Cyrillic, Greek or Armenian first of all, is confusable.
var allowedMixes = [][]string{
	{"Han", "Hiragana", "Katakana", "Latin"},
	{"Bopomofo", "Han", "Latin"},
	{"Hangul", "Han", "Latin"},
}

// ConfusableName reports why the service name s could be taken for another (ok true),
// or "" and false: when it holds a fullwidth form (U+FF01–U+FF5E, the fullwidth
// variants of ASCII's printable characters), or when its letters come from more than
// one script, other than the mixes allowedMixes lists. Digits, '-', '_', '.' and the
// other characters of no particular script are neutral.
func ConfusableName(s string) (reason string, ok bool) {
	scripts := map[string]bool{}
	for _, r := range s {
		if r >= 0xFF01 && r <= 0xFF5E {
			return fmt.Sprintf("contains the fullwidth form %U (%q), which looks like %q", r, r, r-0xFF01+'!'), true
		}
		if !unicode.IsLetter(r) {
			continue
		}
		if sc := scriptOf(r); sc != "" {
			scripts[sc] = true
		}
	}
	if len(scripts) < 2 {
		return "", false
	}
	names := make([]string, 0, len(scripts))
	for sc := range scripts {
		names = append(names, sc)
	}
	sort.Strings(names)
	for _, mix := range allowedMixes {
		if subset(names, mix) {
			return "", false
		}
	}
	return "mixes letters of the " + joinAnd(names) + " scripts", true
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// joinAnd joins names as "A, B and C".
func joinAnd(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
