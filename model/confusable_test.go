package model

import (
	"strings"
	"testing"
)

func TestConfusableName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // "" not confusable, else a part of the reason
	}{
		{"orders", ""},
		{"orders-v2.1_b", ""},
		{"ORDERS", ""},
		{"café", ""},          // Latin with a precomposed letter
		{"cafe\u0301", ""},    // Latin with a combining mark (Inherited)
		{"заказы", ""},        // Cyrillic only
		{"заказы-2", ""},      // Cyrillic and digits
		{"παραγγελίες", ""},   // Greek only
		{"サービス-api", ""},      // Katakana with Latin: one writing system
		{"ひらがな-カタカナ-api", ""}, // Hiragana, Katakana and Latin
		{"주문-api", ""},        // Hangul with Latin
		{"ㄅㄆ-api", ""},        // Bopomofo with Latin
		{"123", ""},
		{"-_.", ""},
		{"\u043erders", "Cyrillic and Latin"},      // Cyrillic о, then Latin
		{"p\u0430yp\u0430l", "Cyrillic and Latin"}, // Cyrillic а twice
		{"заказы-v2", "Cyrillic and Latin"},        // mixed by word: still mixed
		{"\u03bfrders", "Greek and Latin"},         // Greek omicron
		{"\u0585rders", "Armenian and Latin"},      // Armenian օ
		{"\u0430\u03b1a", "Cyrillic, Greek and Latin"},
		{"サービス-заказ", "Cyrillic and Katakana"},
		{"주문-サービス", "Hangul and Katakana"},
		{"\uff4frders", "fullwidth form U+FF4F"}, // fullwidth o
		{"orders\uff01", "fullwidth form U+FF01"},
		{"orders\uff5e", "fullwidth form U+FF5E"},
		{"\uff10\uff11", "fullwidth form U+FF10"}, // fullwidth digits
		{"orders\uff5f", ""},                      // U+FF5F is past the fullwidth ASCII forms
		{"\uff66", ""},                            // halfwidth katakana
	} {
		reason, ok := ConfusableName(tt.name)
		switch {
		case tt.want == "" && ok:
			t.Errorf("%q: confusable (%s), want not", tt.name, reason)
		case tt.want != "" && (!ok || !strings.Contains(reason, tt.want)):
			t.Errorf("%q: %v %q, want a reason containing %q", tt.name, ok, reason, tt.want)
		}
	}
}
