package zkapi

import (
	"fmt"
	"os"
	"strings"
)

// ReadJAASUsers reads the DIGEST-MD5 users of a ZooKeeper server's JAAS
// file: the user_<name>="<password>" options of the entries of section
// (ZooKeeper's default is "Server"), as SaslServerCallbackHandler takes
// them, so that an operator reuses the file their ZooKeeper ran with:
//
//	Server {
//	    org.apache.zookeeper.server.auth.DigestLoginModule required
//	    user_super="adminsecret"
//	    user_kafka="kafkasecret";
//	};
func ReadJAASUsers(path, section string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("JAAS file: %w", err)
	}
	sections, err := parseJAAS(string(b))
	if err != nil {
		return nil, fmt.Errorf("JAAS file %s: %w", path, err)
	}
	entries, ok := sections[section]
	if !ok {
		return nil, fmt.Errorf("JAAS file %s: no %q section", path, section)
	}
	users := map[string]string{}
	for _, e := range entries {
		for k, v := range e.options {
			if name, ok := strings.CutPrefix(k, "user_"); ok {
				users[name] = v
			}
		}
	}
	return users, nil
}

// jaasEntry is one login module line of a JAAS section.
type jaasEntry struct {
	module, flag string
	options      map[string]string
}

// parseJAAS reads the JAAS configuration file syntax of the JDK's
// ConfigFile: Name { module flag key=value ... ; ... }; with quoted or
// bare values and // and /* */ comments. Section names are matched as
// written.
func parseJAAS(s string) (map[string][]jaasEntry, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return nil, err
	}
	i := 0
	next := func() (jaasToken, bool) {
		if i == len(toks) {
			return jaasToken{}, false
		}
		i++
		return toks[i-1], true
	}
	expect := func(what string, punct byte) error {
		t, ok := next()
		if !ok || !t.punct(punct) {
			return fmt.Errorf("expected %q %s, found %s", punct, what, t.describe(ok))
		}
		return nil
	}
	out := map[string][]jaasEntry{}
	for i < len(toks) {
		name, _ := next()
		if name.quoted || name.text == "" {
			return nil, fmt.Errorf("expected a section name, found %s", name.describe(true))
		}
		if err := expect("after section "+name.text, '{'); err != nil {
			return nil, err
		}
		var entries []jaasEntry
		for {
			t, ok := next()
			if !ok {
				return nil, fmt.Errorf("section %s is not closed", name.text)
			}
			if t.punct('}') {
				break
			}
			if t.quoted || t.text == "" {
				return nil, fmt.Errorf("section %s: expected a login module, found %s", name.text, t.describe(true))
			}
			flag, ok := next()
			switch strings.ToLower(flag.text) {
			case "required", "requisite", "sufficient", "optional":
			default:
				return nil, fmt.Errorf("section %s: module %s: expected a control flag, found %s", name.text, t.text, flag.describe(ok))
			}
			e := jaasEntry{module: t.text, flag: flag.text, options: map[string]string{}}
			for {
				k, ok := next()
				if !ok {
					return nil, fmt.Errorf("section %s: module %s: missing ';'", name.text, t.text)
				}
				if k.punct(';') {
					break
				}
				if k.quoted || k.text == "" {
					return nil, fmt.Errorf("section %s: expected an option name, found %s", name.text, k.describe(true))
				}
				if err := expect("after option "+k.text, '='); err != nil {
					return nil, err
				}
				v, ok := next()
				if !ok || (!v.quoted && v.text == "") {
					return nil, fmt.Errorf("section %s: option %s has no value", name.text, k.text)
				}
				e.options[k.text] = v.text
			}
			entries = append(entries, e)
		}
		if err := expect("after section "+name.text, ';'); err != nil {
			return nil, err
		}
		out[name.text] = append(out[name.text], entries...)
	}
	return out, nil
}

// jaasToken is a word, a quoted string or (text empty, p set) a
// punctuation character.
type jaasToken struct {
	text   string
	quoted bool
	p      byte
	line   int
}

func (t jaasToken) punct(c byte) bool { return t.p == c }

func (t jaasToken) describe(ok bool) string {
	switch {
	case !ok:
		return "the end of the file"
	case t.p != 0:
		return fmt.Sprintf("%q on line %d", t.p, t.line)
	}
	return fmt.Sprintf("%q on line %d", t.text, t.line)
}

func jaasTokens(s string) ([]jaasToken, error) {
	var toks []jaasToken
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("comment from line %d is not closed", line)
			}
			line += strings.Count(s[i:i+2+end], "\n")
			i += end + 4
		case strings.IndexByte("{};=", c) >= 0:
			toks = append(toks, jaasToken{p: c, line: line})
			i++
		case c == '"':
			var b strings.Builder
			start := line
			i++
			for {
				if i == len(s) {
					return nil, fmt.Errorf("quoted value from line %d is not closed", start)
				}
				c := s[i]
				i++
				if c == '"' {
					break
				}
				if c == '\n' {
					line++
				}
				if c == '\\' && i < len(s) {
					c = s[i]
					i++
				}
				b.WriteByte(c)
			}
			toks = append(toks, jaasToken{text: b.String(), quoted: true, line: start})
		default:
			start := i
			for i < len(s) && !strings.ContainsRune(" \t\r\n\f{};=\"", rune(s[i])) && !strings.HasPrefix(s[i:], "//") && !strings.HasPrefix(s[i:], "/*") {
				i++
			}
			toks = append(toks, jaasToken{text: s[start:i], line: line})
		}
	}
	return toks, nil
}
