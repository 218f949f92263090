package saslmd5

import (
	"fmt"
	"strings"
)

// ParseDirectives reads a digest-challenge or digest-response (RFC 2831
// section 7.1): a comma-separated list of name=value, where a value is a
// token or a quoted-string with backslash escapes, with optional linear
// white space around each element and empty elements allowed. Names are
// case-insensitive and returned in lower case; a name given twice is an
// error, as the JDK's parser makes it.
func ParseDirectives(b []byte) (map[string]string, error) {
	out := map[string]string{}
	s := string(b)
	i := 0
	skipLWS := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
			i++
		}
	}
	for {
		skipLWS()
		if i == len(s) {
			return out, nil
		}
		if s[i] == ',' {
			i++
			continue
		}
		start := i
		for i < len(s) && isTokenChar(s[i]) {
			i++
		}
		name := strings.ToLower(s[start:i])
		if name == "" {
			return nil, fmt.Errorf("%w: unexpected %q at byte %d", ErrAuth, s[i], i)
		}
		skipLWS()
		if i == len(s) || s[i] != '=' {
			return nil, fmt.Errorf("%w: directive %q has no value", ErrAuth, name)
		}
		i++
		skipLWS()
		var value string
		if i < len(s) && s[i] == '"' {
			i++
			var v strings.Builder
			closed := false
			for i < len(s) {
				c := s[i]
				i++
				if c == '"' {
					closed = true
					break
				}
				if c == '\\' {
					if i == len(s) {
						break
					}
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
			if !closed {
				return nil, fmt.Errorf("%w: unterminated quoted value of %q", ErrAuth, name)
			}
			value = v.String()
		} else {
			start := i
			for i < len(s) && isTokenChar(s[i]) {
				i++
			}
			value = s[start:i]
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: directive %q appears more than once", ErrAuth, name)
		}
		out[name] = value
		skipLWS()
		if i < len(s) && s[i] != ',' {
			return nil, fmt.Errorf("%w: unexpected %q after directive %q", ErrAuth, s[i], name)
		}
	}
}

// isTokenChar reports whether c may appear in an RFC 2616 token: a
// printable ASCII character other than a separator.
func isTokenChar(c byte) bool {
	if c <= ' ' || c >= 0x7f {
		return false
	}
	return !strings.ContainsRune("()<>@,;:\\\"/[]?={} \t", rune(c))
}
