package zkapi

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadJAASUsers(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       map[string]string
		err        string
	}{
		{"ZooKeeper's example", `Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bobsecret";
};`, map[string]string{"super": "adminsecret", "bob": "bobsecret"}, ""},
		{"comments, escapes, other sections, several modules", `// the client
Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="bob" password="x"; };
/* the
   server */
Server {
  com.example.Other optional debug=true;
  org.apache.zookeeper.server.auth.DigestLoginModule required user_q="a\"b\\c" user_e="";
};`, map[string]string{"q": `a"b\c`, "e": ""}, ""},
		{"no Server section", `Client { m required username="a"; };`, nil, `no "Server" section`},
		{"missing semicolon", `Server { m required user_a="x" };`, nil, "expected an option name"},
		{"missing semicolon at the end", `Server { m required user_a="x"`, nil, "missing ';'"},
		{"missing flag", `Server { m user_a="x"; };`, nil, "control flag"},
		{"unclosed section", `Server { m required user_a="x";`, nil, "not closed"},
		{"unclosed quote", `Server { m required user_a="x; };`, nil, "not closed"},
		{"unclosed comment", `/* Server`, nil, "not closed"},
		{"option without value", `Server { m required user_a=; };`, nil, "no value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jaas.conf")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadJAASUsers(path, "Server")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestValidACLIDs(t *testing.T) {
	for _, tc := range []struct {
		scheme, id string
		valid      bool
	}{
		{"sasl", "kafka", true},
		{"sasl", "kafka/host@EXAMPLE.COM", true},
		{"sasl", "kafka@EXAMPLE.COM", true},
		{"sasl", "a@b@c", false},
		{"sasl", "a/b/c@R", false},
		{"x509", "CN=alice", true},
		{"x509", "CN=alice,OU=ops,O=Example,C=US", true},
		{"x509", `CN=a\,b+UID=1`, true},
		{"x509", "2.5.4.3=alice", true},
		{"x509", "OID.2.5.4.3=alice", true},
		{"x509", "cn=alice", true},
		{"x509", "notadn", false},
		{"x509", "FOO=bar", false},
		{"x509", "", false},
		{"x509", "CN=a,", false},
	} {
		var got bool
		switch tc.scheme {
		case "sasl":
			got = validSASLID(tc.id)
		case "x509":
			got = validX509ID(tc.id)
		}
		if got != tc.valid {
			t.Errorf("%s:%q valid = %v, want %v", tc.scheme, tc.id, got, tc.valid)
		}
	}
}

// FuzzParseJAAS: no file makes the JAAS parser panic or loop, and every
// section it returns has modules with a control flag.
//
// Run it with: go test ./zkapi -run '^$' -fuzz FuzzParseJAAS -fuzztime 60s
func FuzzParseJAAS(f *testing.F) {
	f.Add(`Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_a="x\"y"; };`)
	f.Add("// c\n/* d */ Client { m optional k=v; m2 sufficient; };")
	f.Add(`Server { m required user_a=; };`)
	f.Add(`/* open`)
	f.Fuzz(func(t *testing.T, s string) {
		sections, err := parseJAAS(s)
		if err != nil {
			return
		}
		for name, entries := range sections {
			for _, e := range entries {
				if e.module == "" || e.flag == "" {
					t.Fatalf("section %q: entry %+v without a module or flag", name, e)
				}
			}
		}
	})
}
