package zkapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/januskv/janus/core"
	"github.com/januskv/janus/zkapi/jute"
)

// threeMembers is a configuration as a 3-member Janus ensemble started
// from flags shows it (version 0, no election address named).
func threeMembers() core.Cluster {
	return core.Cluster{Members: []core.ClusterMember{
		{ID: 1, Name: "a", PeerURL: "http://127.0.0.1:2888", ZKAddr: "127.0.0.1:2181", EtcdURL: "http://127.0.0.1:2379"},
		{ID: 2, Name: "b", PeerURL: "http://127.0.0.1:2889", ZKAddr: "127.0.0.1:2182"},
		{ID: 3, Name: "c", PeerURL: "http://127.0.0.1:2890", ZKAddr: "127.0.0.1:2183", IsObserver: true},
	}}
}

func TestConfigData(t *testing.T) {
	cl := threeMembers()
	cl.Version, cl.Time = 0x100000007, 1_764_662_400_123
	cl.Members[1].ZKElectionAddr = "127.0.0.1:3889"
	cl.Members = append(cl.Members, core.ClusterMember{ID: 4, PeerURL: "http://[::1]:2891", ZKAddr: "[::1]:2184"})
	want := "server.1=127.0.0.1:2888:0:participant;127.0.0.1:2181\n" +
		"server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n" +
		"server.3=127.0.0.1:2890:0:observer;127.0.0.1:2183\n" +
		"server.4=[::1]:2891:0:participant;[::1]:2184\n" +
		"version=100000007"
	data := configData(cl)
	if string(data) != want {
		t.Fatalf("configData:\n%s\nwant:\n%s", data, want)
	}
	st := configStat(cl, data)
	if st.Mzxid != 0x100000007 || st.Mtime != 1_764_662_400_123 || st.Czxid != 0 || st.Version != -1 || st.Aversion != -1 || st.DataLength != int32(len(want)) {
		t.Fatalf("configStat = %+v", st)
	}
}

func TestNextConfig(t *testing.T) {
	tests := []struct {
		name string
		req  jute.ReconfigRequest
		want string // configData of the result at version 0, or the error
		err  error
	}{
		{name: "remove", req: jute.ReconfigRequest{LeavingServers: "3"},
			want: "server.1=127.0.0.1:2888:0:participant;127.0.0.1:2181\nserver.2=127.0.0.1:2889:0:participant;127.0.0.1:2182\nversion=0"},
		{name: "remove unknown keeps all", req: jute.ReconfigRequest{LeavingServers: " 9 ,"},
			want: "server.1=127.0.0.1:2888:0:participant;127.0.0.1:2181\nserver.2=127.0.0.1:2889:0:participant;127.0.0.1:2182\nserver.3=127.0.0.1:2890:0:observer;127.0.0.1:2183\nversion=0"},
		{name: "add with client port only", req: jute.ReconfigRequest{JoiningServers: "server.5=127.0.0.1:2895:3895;2185"},
			want: "server.1=127.0.0.1:2888:0:participant;127.0.0.1:2181\nserver.2=127.0.0.1:2889:0:participant;127.0.0.1:2182\nserver.3=127.0.0.1:2890:0:observer;127.0.0.1:2183\nserver.5=127.0.0.1:2895:3895:participant;0.0.0.0:2185\nversion=0"},
		{name: "observer to participant", req: jute.ReconfigRequest{JoiningServers: "server.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183"},
			want: "server.1=127.0.0.1:2888:0:participant;127.0.0.1:2181\nserver.2=127.0.0.1:2889:0:participant;127.0.0.1:2182\nserver.3=127.0.0.1:2890:3890:participant;127.0.0.1:2183\nversion=0"},
		{name: "remove and add", req: jute.ReconfigRequest{LeavingServers: "2", JoiningServers: "server.4=127.0.0.1:2891:3891:observer;127.0.0.1:2184"},
			err: errReconfigArgs}, // one voter left
		{name: "members", req: jute.ReconfigRequest{NewMembers: "server.1=127.0.0.1:2888:3888;2181,server.7=127.0.0.1:2897:3897:participant;127.0.0.1:2187"},
			want: "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\nserver.7=127.0.0.1:2897:3897:participant;127.0.0.1:2187\nversion=0"},
		{name: "members keeping client addresses", req: jute.ReconfigRequest{NewMembers: "server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:0:participant"},
			want: "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\nserver.2=127.0.0.1:2889:0:participant;127.0.0.1:2182\nversion=0"},
		{name: "members of one voter", req: jute.ReconfigRequest{NewMembers: "server.1=127.0.0.1:2888:3888;2181"}, err: errReconfigArgs},
		{name: "leaving not a number", req: jute.ReconfigRequest{LeavingServers: "x"}, err: errReconfigNumber},
		{name: "joiner id not a number", req: jute.ReconfigRequest{JoiningServers: "server.x=127.0.0.1:1:2;3"}, err: errReconfigNumber},
		{name: "joiner without client port", req: jute.ReconfigRequest{JoiningServers: "server.7=127.0.0.1:1254:1255"}, err: errReconfigArgs},
		{name: "joiner with two ports", req: jute.ReconfigRequest{JoiningServers: "server.7=127.0.0.1:1254;1256"}, err: errReconfigArgs},
		{name: "joiner without spec", req: jute.ReconfigRequest{JoiningServers: "server.7"}, err: errReconfigArgs},
		{name: "joiner with a bad role", req: jute.ReconfigRequest{JoiningServers: "server.7=h:1:2:leader;3"}, err: errReconfigArgs},
		{name: "joiner with equal quorum and election ports", req: jute.ReconfigRequest{JoiningServers: "server.7=127.0.0.1:2897:2897;2187"}, err: errReconfigArgs},
		{name: "joiner repeating an address", req: jute.ReconfigRequest{JoiningServers: "server.7=127.0.0.1:2888:3897;2187"}, err: errReconfigArgs},
		{name: "members of a hierarchical quorum", req: jute.ReconfigRequest{NewMembers: "group.1=1:2"}, err: errReconfigArgs},
		{name: "members pasted with their version", req: jute.ReconfigRequest{NewMembers: "server.1=127.0.0.1:2888:3888;2181\nserver.2=127.0.0.1:2889:3889;2182\nversion=100000000\n"},
			want: "server.1=127.0.0.1:2888:3888:participant;0.0.0.0:2181\nserver.2=127.0.0.1:2889:3889:participant;0.0.0.0:2182\nversion=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, err := nextConfig(threeMembers(), &tt.req)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("nextConfig: %v", err)
			}
			if got := string(configData(core.Cluster{Members: next})); got != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestNextConfigKeepsJanusFields: a member a reconfig re-adds keeps its
// name and etcd address, which a ZooKeeper server line cannot carry.
func TestNextConfigKeepsJanusFields(t *testing.T) {
	next, err := nextConfig(threeMembers(), &jute.ReconfigRequest{JoiningServers: "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181"})
	if err != nil {
		t.Fatal(err)
	}
	m := next[0]
	if m.Name != "a" || m.EtcdURL != "http://127.0.0.1:2379" || m.IsObserver || m.ZKElectionAddr != "127.0.0.1:3888" {
		t.Fatalf("re-added member = %+v", m)
	}
}

// FuzzReconfigRequest decodes a frame body as a reconfig request and
// computes the configuration it asks for from a 3-member one. No input
// panics; every accepted configuration has distinct IDs in order, at least
// two voters, and shows each member in a line that parses back to it.
//
// Run it with: go test ./zkapi -run '^$' -fuzz FuzzReconfigRequest -fuzztime 60s
func FuzzReconfigRequest(f *testing.F) {
	for _, r := range []jute.ReconfigRequest{
		{LeavingServers: "3", CurConfigID: -1},
		{JoiningServers: "server.4=127.0.0.1:2891:3891:observer;127.0.0.1:2184,server.5=[::1]:1:2;[::1]:3", CurConfigID: 5},
		{NewMembers: "server.1=127.0.0.1:2888:3888;2181\nserver.2=h:1:2:participant;4", CurConfigID: -1},
		{LeavingServers: "1,2", JoiningServers: "server.9=a:1:2;3,server.8=b:1:2;c:3"},
	} {
		e := jute.NewEncoder(nil)
		r.Encode(e)
		f.Add(e.Bytes())
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r jute.ReconfigRequest
		d := jute.NewDecoder(body)
		d.SetMaxLength(jute.DefaultMaxBuffer)
		r.Decode(d)
		if d.Err() != nil {
			return
		}
		checkNextConfig(t, &r)
	})
}

// FuzzReconfigStrings is FuzzReconfigRequest on the request's three
// strings directly, where most inputs reach the parser.
//
// Run it with: go test ./zkapi -run '^$' -fuzz FuzzReconfigStrings -fuzztime 60s
func FuzzReconfigStrings(f *testing.F) {
	f.Add("server.4=127.0.0.1:2891:3891:observer;127.0.0.1:2184", "3", "")
	f.Add("server.5=[::1]:1:2;[::1]:3,server.6=h:4:5:participant;6", "1, 2", "")
	f.Add("", "", "server.1=127.0.0.1:2888:3888;2181\nserver.2=h:1:2:participant;4")
	f.Add("", "", "server.1=a:1:2,server.2=b:3:4;c:5\n# comment\n")
	f.Fuzz(func(t *testing.T, joining, leaving, members string) {
		checkNextConfig(t, &jute.ReconfigRequest{JoiningServers: joining, LeavingServers: leaving, NewMembers: members})
	})
}

// checkNextConfig computes the configuration r asks for from a 3-member
// one and checks what FuzzReconfigRequest promises.
func checkNextConfig(t *testing.T, r *jute.ReconfigRequest) {
	next, err := nextConfig(threeMembers(), r)
	if err != nil {
		if !errors.Is(err, errReconfigArgs) && !errors.Is(err, errReconfigNumber) {
			t.Fatalf("nextConfig error %v is neither BadArguments nor MarshallingError", err)
		}
		return
	}
	voters := 0
	for i, m := range next {
		if i > 0 && next[i-1].ID >= m.ID {
			t.Fatalf("members out of order: %+v", next)
		}
		if !m.IsObserver {
			voters++
		}
		line := serverSpec(m)
		var back core.ClusterMember
		if err := parseServerSpec(line, &back, m.ZKAddr != ""); err != nil {
			t.Fatalf("server.%d=%s does not parse back: %v", m.ID, line, err)
		}
		if back.PeerURL != m.PeerURL || back.ZKElectionAddr != m.ZKElectionAddr && m.ZKElectionAddr != "" ||
			back.ZKAddr != m.ZKAddr || back.IsObserver != m.IsObserver {
			t.Fatalf("server.%d=%s parses back as %+v, was %+v", m.ID, line, back, m)
		}
	}
	if voters < 2 {
		t.Fatalf("accepted a configuration of %d voters", voters)
	}
	if data := string(configData(core.Cluster{Members: next})); !strings.HasSuffix(data, "version=0") {
		t.Fatalf("configData = %q", data)
	}
}
