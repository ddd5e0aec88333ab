package qlimit

import (
	"unicode/utf8"
)

type tokKind uint8

const (
	tokIdent  tokKind = iota // names, keywords, numbers, durations
	tokString                // a quoted string
	tokOpen                  // ( [ {
	tokClose                 // ) ] }
	tokComma
	tokAssign // a lone '=' (a WITH definition or a label matcher)
	tokOp     // any other run of operator characters
)

type token struct {
	kind tokKind
	text string // the source text; for brackets the bracket itself
}

// scan splits q into the tokens both PromQL and MetricsQL are made of,
// closely enough to count them: it never fails, an unterminated string ends
// at the end of q, and bytes that belong to neither dialect are one token
// each. yield returning false stops the scan.
func scan(q string, yield func(token) bool) {
	for i := 0; i < len(q); {
		c := q[i]
		start := i
		var t token
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '#':
			for i < len(q) && q[i] != '\n' {
				i++
			}
			continue
		case c == '"' || c == '\'' || c == '`':
			i++
			for i < len(q) && q[i] != c {
				if q[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			i = min(i+1, len(q))
			t = token{kind: tokString, text: q[start:i]}
		case c == '(' || c == '[' || c == '{':
			i++
			t = token{kind: tokOpen, text: q[start:i]}
		case c == ')' || c == ']' || c == '}':
			i++
			t = token{kind: tokClose, text: q[start:i]}
		case c == ',':
			i++
			t = token{kind: tokComma, text: ","}
		case isOpChar(c):
			for i < len(q) && isOpChar(q[i]) {
				i++
			}
			t = token{kind: tokOp, text: q[start:i]}
			if t.text == "=" {
				t.kind = tokAssign
			}
		case isIdentByte(c):
			for i < len(q) && isIdentByte(q[i]) {
				i++
			}
			t = token{kind: tokIdent, text: q[start:i]}
		default:
			_, n := utf8.DecodeRuneInString(q[i:])
			i += n
			t = token{kind: tokOp, text: q[start:i]}
		}
		if !yield(t) {
			return
		}
	}
}

func isOpChar(c byte) bool {
	switch c {
	case '+', '-', '*', '/', '%', '^', '=', '!', '<', '>', '~', '@', '|', '&':
		return true
	}
	return false
}

// isIdentByte accepts the bytes of names, numbers and durations, and every
// byte of a multi-byte UTF-8 character, so that UTF-8 names are one token.
func isIdentByte(c byte) bool {
	return c == '_' || c == ':' || c == '.' || c == '$' ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c >= 0x80
}
