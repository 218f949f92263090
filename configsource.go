package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// envPrefix starts every environment variable that sets a flag:
// JANUS_DATA_DIR sets --data-dir.
const envPrefix = "JANUS_"

// applySources sets, on fs, the flags the command line left unset: from
// JANUS_* variables first, then from the YAML configuration file, then
// from the ZooKeeper one. An unknown key in a file, or a value its flag
// refuses, stops start-up with one line naming the file and the key.
func applySources(fs *flag.FlagSet, environ []string, stderr io.Writer, configFile, zkConfig *string) error {
	set := map[string]string{} // flag → where its value came from
	fs.Visit(func(f *flag.Flag) { set[f.Name] = "the command line" })

	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		rest, ok := strings.CutPrefix(k, envPrefix)
		if !ok {
			continue
		}
		name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
		f := fs.Lookup(name)
		if f == nil {
			// Tests and tools use JANUS_* variables of their own; etcd
			// warns about an unknown ETCD_* one the same way.
			fmt.Fprintf(stderr, "janus: ignoring environment variable %s: no flag --%s\n", k, name)
			continue
		}
		if set[name] != "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("environment variable %s: %w", k, err)
		}
		set[name] = "the environment"
	}

	if *configFile != "" {
		values, err := readYAMLConfig(*configFile)
		if err != nil {
			return err
		}
		if err := setFromFile(fs, set, *configFile, values); err != nil {
			return err
		}
	}
	if *zkConfig != "" {
		values, ignored, err := readZooCfg(*zkConfig)
		if err != nil {
			return err
		}
		if len(ignored) > 0 {
			fmt.Fprintf(stderr, "janus: %s: ignoring keys with no equivalent: %s\n", *zkConfig, strings.Join(ignored, ", "))
		}
		if err := setFromFile(fs, set, *zkConfig, values); err != nil {
			return err
		}
	}
	return nil
}

// fileValue is one key of a configuration file, as the flag it sets.
type fileValue struct {
	key   string // as written in the file, for messages
	flag  string
	value string
}

// setFromFile sets each value's flag unless a source before the file set
// it. Files cannot point at other files.
func setFromFile(fs *flag.FlagSet, set map[string]string, file string, values []fileValue) error {
	for _, v := range values {
		f := fs.Lookup(v.flag)
		if f == nil || v.flag == "config-file" || v.flag == "zk-config" {
			return fmt.Errorf("config file %s: unknown key %q", file, v.key)
		}
		if set[v.flag] != "" {
			continue
		}
		value := v.value
		if isDuration(f) {
			if ms, err := strconv.ParseInt(value, 10, 64); err == nil {
				value = (time.Duration(ms) * time.Millisecond).String()
			}
		}
		if err := fs.Set(v.flag, value); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", file, v.key, err)
		}
		set[v.flag] = file
	}
	return nil
}

func isDuration(f *flag.Flag) bool {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	_, ok = g.Get().(time.Duration)
	return ok
}

// readYAMLConfig reads a YAML map of flag names to values. Lists become
// comma-separated values, as the flags take them.
func readYAMLConfig(path string) ([]fileValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []fileValue
	for _, k := range keys {
		s, err := yamlScalar(m[k])
		if err != nil {
			return nil, fmt.Errorf("config file %s: key %q: %w", path, k, err)
		}
		out = append(out, fileValue{key: k, flag: k, value: s})
	}
	return out, nil
}

func yamlScalar(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), nil
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			s, err := yamlScalar(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	default:
		return "", fmt.Errorf("a %T is not a value a flag takes", v)
	}
}

// zooCfgKeys maps zoo.cfg keys that have an equivalent to the flag they
// set; zooCfgIgnored are keys Janus reads without acting on (say why in
// the README). server.N, clientPort/clientPortAddress and dataDir's myid
// are handled apart, as is dynamicConfigFile, whose file holds server.N.
var (
	zooCfgKeys = map[string]string{
		"dataDir":                        "data-dir",
		"tickTime":                       "tick-time",
		"maxClientCnxns":                 "max-client-cnxns",
		"maxCnxns":                       "max-cnxns",
		"minSessionTimeout":              "min-session-timeout",
		"maxSessionTimeout":              "max-session-timeout",
		"4lw.commands.whitelist":         "4lw-whitelist",
		"jute.maxbuffer":                 "jute-maxbuffer",
		"extendedTypesEnabled":           "extended-types-enabled",
		"reconfigEnabled":                "zk-reconfig-enabled",
		"zookeeper.extendedTypesEnabled": "extended-types-enabled",
		// ZooKeeper makes any other key k the system property
		// zookeeper.k, so these are its -D authentication settings.
		"DigestAuthenticationProvider.superDigest": "zk-super-digest",
		"X509AuthenticationProvider.superUser":     "zk-x509-super-user",
		"superUser":                                "zk-sasl-super-user",
	}
	zooCfgIgnored = map[string]bool{
		"dataLogDir": true, "initLimit": true, "preAllocSize": true, "snapCount": true,
		"autopurge.snapRetainCount": true,
		"admin.enableServer":        true, "admin.serverPort": true, "admin.serverAddress": true,
		"standaloneEnabled":         true,
		"metricsProvider.className": true, "metricsProvider.httpPort": true,
		"quorumListenOnAllIPs": true, "electionAlg": true, "peerType": true,
		"clientPortListenBacklog": true, "globalOutstandingLimit": true,
		"syncEnabled": true, "forceSync": true, "leaderServes": true,
	}
	// zooCfgIgnoredPrefixes are key families read without acting on:
	// authProvider.N loads an authentication provider class, and Janus
	// has its providers built in.
	zooCfgIgnoredPrefixes = []string{"authProvider."}
)

// readZooCfg maps a ZooKeeper configuration file onto Janus's flags.
// Ensemble lines (server.N=host:quorumPort:electionPort[:observer][;[clientHost:]clientPort]),
// in the file itself or in the one dynamicConfigFile names, become
// --peers, --observers, --peer-zk and --peer-zk-election; myid in dataDir
// becomes --id; syncLimit x tickTime becomes --election-timeout, as it is
// how long a ZooKeeper follower waits for its leader. An ensemble with a
// version (a version= line in zoo.cfg, or the hexadecimal suffix of the
// dynamic file's name, as ZooKeeper names it) other than 0 is a running
// one: a member whose data directory holds no state yet joins it
// (--initial-cluster-state existing).
func readZooCfg(path string) (values []fileValue, ignored []string, err error) {
	props, order, err := readProperties(path)
	if err != nil {
		return nil, nil, fmt.Errorf("zk config %s: %w", path, err)
	}
	if name := props["dynamicConfigFile"]; name != "" {
		dynPath := dynamicConfigPath(path, name)
		dyn, dynOrder, err := readProperties(dynPath)
		if err != nil {
			return nil, nil, fmt.Errorf("zk config %s: dynamicConfigFile: %w", path, err)
		}
		for _, k := range order {
			if isDynamicKey(k) {
				// ZooKeeper refuses the same: the ensemble lives in one
				// file, which its reconfig rewrites.
				return nil, nil, fmt.Errorf("zk config %s: key %q: with dynamicConfigFile set it belongs in %s", path, k, dynPath)
			}
		}
		for _, k := range dynOrder {
			if k == "version" {
				// ZooKeeper refuses it there: the version is in the name.
				return nil, nil, fmt.Errorf("zk config %s: key %q: a dynamic file has its version in its name (zoo.cfg.dynamic.<hex>), not inside", dynPath, k)
			}
			if !isDynamicKey(k) {
				return nil, nil, fmt.Errorf("zk config %s: unknown key %q", dynPath, k)
			}
			props[k] = dyn[k]
			order = append(order, k)
		}
		if v, ok := versionFromFilename(dynPath); ok {
			props["version"] = v
			order = append(order, "version")
		}
	}
	add := func(key, flag, value string) { values = append(values, fileValue{key: key, flag: flag, value: value}) }

	tick := 2000 * time.Millisecond
	if v, ok := props["tickTime"]; ok {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, nil, fmt.Errorf("zk config %s: key %q: %q is not a positive number of milliseconds", path, "tickTime", v)
		}
		tick = time.Duration(ms) * time.Millisecond
	}
	if v, ok := props["clientPort"]; ok {
		host := props["clientPortAddress"]
		if host == "" {
			host = "0.0.0.0"
		}
		add("clientPort", "zk-listen", net.JoinHostPort(host, v))
	}
	if v, ok := props["syncLimit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, nil, fmt.Errorf("zk config %s: key %q: %q is not a positive number of ticks", path, "syncLimit", v)
		}
		add("syncLimit", "election-timeout", (time.Duration(n) * tick).String())
	}

	var peers, observers, clients, elections []string
	joining := false
	for _, k := range order {
		v := props[k]
		switch {
		case k == "version":
			// The zxid, in hexadecimal, of the configuration the lines
			// are: 0 for one never committed, as ZooKeeper reads it.
			version, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("zk config %s: key %q: %q is not a hexadecimal zxid", path, k, v)
			}
			joining = version != 0
		case strings.HasPrefix(k, "server."):
			id, err := strconv.ParseUint(strings.TrimPrefix(k, "server."), 10, 64)
			if err != nil || id == 0 {
				return nil, nil, fmt.Errorf("zk config %s: key %q: the server id must be a positive number", path, k)
			}
			peer, election, observer, client, err := parseZooServer(v)
			if err != nil {
				return nil, nil, fmt.Errorf("zk config %s: key %q: %w", path, k, err)
			}
			entry := fmt.Sprintf("%d=%s", id, peer)
			if observer {
				observers = append(observers, entry)
			} else {
				peers = append(peers, entry)
			}
			if client != "" {
				clients = append(clients, fmt.Sprintf("%d=%s", id, client))
			}
			if election != "" {
				elections = append(elections, fmt.Sprintf("%d=%s", id, election))
			}
		case zooCfgKeys[k] != "":
			value := v
			if k == "4lw.commands.whitelist" {
				value = strings.ReplaceAll(value, " ", "")
			}
			add(k, zooCfgKeys[k], value)
		case k == "autopurge.purgeInterval":
			// ZooKeeper purges old snapshots and logs every N hours (0:
			// never); Janus's nearest habit is compacting history older
			// than that. 0 leaves Janus's default compaction.
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, nil, fmt.Errorf("zk config %s: key %q: %q is not a number of hours", path, k, v)
			}
			if n > 0 {
				add(k, "auto-compaction-mode", "periodic")
				add(k, "auto-compaction-retention", fmt.Sprintf("%dh", n))
			}
		case k == "clientPort" || k == "clientPortAddress" || k == "syncLimit" || k == "dynamicConfigFile":
		case k == "sessionRequireClientSASLAuth" || k == "enforce.auth.enabled" || k == "enforce.auth.schemes":
			// Read together below.
		case zooCfgIgnored[k] || slices.ContainsFunc(zooCfgIgnoredPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }):
			ignored = append(ignored, k)
		default:
			return nil, nil, fmt.Errorf("zk config %s: unknown key %q", path, k)
		}
	}
	// AuthenticationHelper: sessionRequireClientSASLAuth=true means sasl
	// is required, and wins over enforce.auth.enabled with its schemes.
	switch {
	case strings.EqualFold(props["sessionRequireClientSASLAuth"], "true"):
		add("sessionRequireClientSASLAuth", "zk-enforce-auth-schemes", "sasl")
	case strings.EqualFold(props["enforce.auth.enabled"], "true"):
		schemes := strings.ReplaceAll(props["enforce.auth.schemes"], " ", "")
		if schemes == "" {
			return nil, nil, fmt.Errorf("zk config %s: enforce.auth.enabled is true, so enforce.auth.schemes must be set", path)
		}
		add("enforce.auth.schemes", "zk-enforce-auth-schemes", schemes)
	}
	if _, on := props["extendedTypesEnabled"]; !on {
		if _, on := props["zookeeper.extendedTypesEnabled"]; !on {
			// ZooKeeper's default: a zoo.cfg that does not turn TTL nodes
			// on starts a server without them.
			add("extendedTypesEnabled (default)", "extended-types-enabled", "false")
		}
	}
	if len(peers)+len(observers) > 0 {
		add("server.N", "peers", strings.Join(peers, ","))
		if len(observers) > 0 {
			add("server.N", "observers", strings.Join(observers, ","))
		}
		if len(clients) > 0 {
			add("server.N", "peer-zk", strings.Join(clients, ","))
		}
		if len(elections) > 0 {
			add("server.N", "peer-zk-election", strings.Join(elections, ","))
		}
		// A ZooKeeper ensemble member learns its id from dataDir/myid.
		if dir := props["dataDir"]; dir != "" {
			myid, err := os.ReadFile(filepath.Join(dir, "myid"))
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				return nil, nil, fmt.Errorf("zk config %s: read myid: %w", path, err)
			default:
				add("myid", "id", strings.TrimSpace(string(myid)))
			}
		}
		if joining {
			fresh, err := holdsNoState(props["dataDir"])
			if err != nil {
				return nil, nil, fmt.Errorf("zk config %s: %w", path, err)
			}
			if fresh {
				add("version", "initial-cluster-state", "existing")
			}
		}
	}
	return values, ignored, nil
}

// readProperties reads a Java properties file of key=value lines, as
// ZooKeeper does: the keys in the order first seen, the last value of
// each.
func readProperties(path string) (props map[string]string, order []string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	props = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' || l[0] == '!' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, nil, fmt.Errorf("line %d: %q is not key=value", line, l)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if _, dup := props[k]; !dup {
			order = append(order, k)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return props, order, nil
}

// isDynamicKey reports whether a zoo.cfg key describes the ensemble, which
// ZooKeeper 3.5+ keeps in the dynamic configuration file.
func isDynamicKey(k string) bool {
	return k == "version" || strings.HasPrefix(k, "server.") || strings.HasPrefix(k, "group.") || strings.HasPrefix(k, "weight.")
}

// versionFromFilename reads a dynamic file's version as ZooKeeper does:
// the part of its name after the last dot, if that is hexadecimal
// (zoo.cfg.dynamic.100000000).
func versionFromFilename(path string) (string, bool) {
	name := filepath.Base(path)
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", false
	}
	if _, err := strconv.ParseUint(name[i+1:], 16, 64); err != nil {
		return "", false
	}
	return name[i+1:], true
}

// dynamicConfigPath locates the file dynamicConfigFile names. ZooKeeper
// opens a relative name from its working directory, and writes the name
// after the path it was given for zoo.cfg (zkServer.sh gives an absolute
// one); a relative name not found there is looked up next to zoo.cfg,
// where ZooKeeper writes the file.
func dynamicConfigPath(zooCfg, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	if _, err := os.Stat(name); err == nil {
		return name
	}
	return filepath.Join(filepath.Dir(zooCfg), name)
}

// holdsNoState reports whether dataDir has no Janus state yet: no zab log
// (a ZooKeeper dataDir holds myid, and maybe ZooKeeper's own files, which
// Janus does not read).
func holdsNoState(dataDir string) (bool, error) {
	if dataDir == "" {
		return true, nil
	}
	des, err := os.ReadDir(filepath.Join(dataDir, "log"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("data dir: %w", err)
	}
	return len(des) == 0, nil
}

// parseZooServer reads a server.N value:
// host:quorumPort[:electionPort][:participant|observer][;[clientHost:]clientPort].
// Janus uses one peer port, the quorum one; the election address is only
// shown back in /zookeeper/config.
func parseZooServer(v string) (peer, election string, observer bool, client string, err error) {
	addrs, clientPart, _ := strings.Cut(v, ";")
	parts := strings.Split(addrs, ":")
	if len(parts) < 2 {
		return "", "", false, "", fmt.Errorf("%q is not host:quorumPort:electionPort", v)
	}
	if last := parts[len(parts)-1]; last == "observer" || last == "participant" {
		observer = last == "observer"
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 3 {
		return "", "", false, "", fmt.Errorf("%q is not host:quorumPort:electionPort[:participant|observer]", v)
	}
	if _, err := strconv.ParseUint(parts[1], 10, 16); err != nil {
		return "", "", false, "", fmt.Errorf("%q: quorum port %q is not a port", v, parts[1])
	}
	peer = net.JoinHostPort(parts[0], parts[1])
	if len(parts) == 3 {
		if _, err := strconv.ParseUint(parts[2], 10, 16); err != nil {
			return "", "", false, "", fmt.Errorf("%q: election port %q is not a port", v, parts[2])
		}
		election = net.JoinHostPort(parts[0], parts[2])
	}
	if clientPart != "" {
		host, port, found := strings.Cut(clientPart, ":")
		if !found {
			host, port = parts[0], clientPart
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return "", "", false, "", fmt.Errorf("%q: client port %q is not a port", v, port)
		}
		if host == "0.0.0.0" {
			host = parts[0]
		}
		client = net.JoinHostPort(host, port)
	}
	return peer, election, observer, client, nil
}
