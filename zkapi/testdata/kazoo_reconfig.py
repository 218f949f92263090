# Drives ZooKeeper's reconfig through kazoo against one server of a
# 3-member ensemble and prints one normalized line per step, so that the
# same script run against ZooKeeper 3.8 and against Janus can be compared
# line by line.
#
# argv: host:port to connect to, the leader's ID, the connected
# follower's ID, the other follower's ID and client address, the super
# digest password, then 15 unused ports for the servers the script adds (never started).
import sys
import threading

from kazoo.client import KazooClient

hosts = sys.argv[1]
leader, conn, other = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
other_client = sys.argv[5]
password = sys.argv[6]
ports = [int(p) for p in sys.argv[7:22]]
names = {leader: "L", conn: "C", other: "F"}
last_version = [None]
last_mtime = [None]


def norm(data, stat):
    """The configuration with the ensemble's own members named by role
    (their addresses differ between the two runs), sorted, and checks of
    its stat. The mtime is compared with the last read's, never with a
    clock: the same while the version is, set and not earlier once it
    advanced (the configuration an ensemble started with is left out:
    ZooKeeper shows when it wrote it, Janus 0)."""
    lines = []
    version = None
    for line in data.decode().split("\n"):
        key, value = line.split("=", 1)
        if key == "version":
            version = int(value, 16)
            continue
        sid = int(key.split(".")[1])
        if sid in names:
            role = value.split(";")[0].split(":")[-1]
            lines.append("server.%s=%s" % (names[sid], role))
        else:
            lines.append(line)
    stat_ok = (stat.version == -1 and stat.aversion == -1 and stat.czxid == 0
               and stat.mzxid == version and stat.dataLength == len(data)
               and stat.numChildren == 0 and stat.pzxid == 0 and stat.ctime == 0
               and stat.ephemeralOwner == 0 and stat.cversion == 0)
    advanced = last_version[0] is None or version > last_version[0]
    if last_version[0] is None:
        mtime = "first"
    elif version == last_version[0]:
        mtime = "same" if stat.mtime == last_mtime[0] else "changed"
    else:
        mtime = "later" if stat.mtime > 0 and stat.mtime >= last_mtime[0] else "not-later"
    last_version[0], last_mtime[0] = version, stat.mtime
    return "%s stat_ok=%s advanced=%s mtime=%s" % (" ".join(sorted(lines)), stat_ok, advanced, mtime)


def step(name, f):
    try:
        r = f()
        if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], bytes):
            r = norm(*r)
        print(name, "OK", r)
    except Exception as e:
        print(name, "ERR", type(e).__name__)
    sys.stdout.flush()


def spec(i, role="participant"):
    """The i-th added server's spec, on three ports of its own."""
    return "127.0.0.1:%d:%d:%s;127.0.0.1:%d" % (ports[3 * i], ports[3 * i + 1], role, ports[3 * i + 2])


anon = KazooClient(hosts=hosts)
anon.start()
step("anon-get", lambda: anon.get("/zookeeper/config"))
step("anon-acl", lambda: [str(a) for a in anon.get_acls("/zookeeper/config")[0]])
step("anon-reconfig", lambda: anon.reconfig(joining=None, leaving="9", new_members=None))

fired = threading.Event()
events = []


def watcher(ev):
    events.append("%s %s" % (ev.type, ev.path))
    fired.set()


anon.get("/zookeeper/config", watch=watcher)

c = KazooClient(hosts=hosts, auth_data=[("digest", "super:" + password)])
c.start()
step("add-observer", lambda: c.reconfig(joining="server.6=" + spec(0, "observer"), leaving=None, new_members=None))
step("watch", lambda: (fired.wait(60), events)[1])
step("get-after", lambda: c.get("/zookeeper/config"))
step("stale-version", lambda: c.reconfig(joining=None, leaving="9", new_members=None, from_config=1))
step("remove-unknown", lambda: c.reconfig(joining=None, leaving="9", new_members=None))
version = c.get("/zookeeper/config")[1].mzxid
step("from-version", lambda: c.reconfig(joining=None, leaving="9", new_members=None, from_config=version))
step("no-client-port", lambda: c.reconfig(joining="server.7=127.0.0.1:%d:%d" % (ports[3], ports[4]), leaving=None, new_members=None))
step("two-ports", lambda: c.reconfig(joining="server.7=127.0.0.1:%d;%d" % (ports[3], ports[4]), leaving=None, new_members=None))
step("no-spec", lambda: c.reconfig(joining="server.7", leaving=None, new_members=None))
step("leaving-not-a-number", lambda: c.reconfig(joining=None, leaving="x", new_members=None))
step("one-voter-left", lambda: c.reconfig(joining=None, leaving="%d,%d" % (conn, other), new_members=None))
step("no-quorum", lambda: c.reconfig(
    joining=",".join("server.%d=%s" % (11 + k, spec(2 + k)) for k in range(3)), leaving=None, new_members=None))
# Before any role change: a member that changed roles resynchronizes with
# the leader, and ZooKeeper counts only synced members towards the new
# configuration's quorum.
step("add-participant-not-running", lambda: c.reconfig(joining="server.8=" + spec(1), leaving=None, new_members=None))
step("remove-8", lambda: c.reconfig(joining=None, leaving="8", new_members=None))
step("remove-6", lambda: c.reconfig(joining=None, leaving="6", new_members=None))


def with_role(sid, role):
    """server.sid's line of the current configuration with another role
    (and the client address a ZooKeeper started from server lines without
    one leaves out: an incremental reconfig needs it)."""
    for line in c.get("/zookeeper/config")[0].decode().split("\n"):
        if line.startswith("server.%d=" % sid):
            server, _, client = line.partition(";")
            parts = server.split(":")
            line = ":".join(parts[:3] + [role])
            return line + ";" + (client or other_client)


step("participant-to-observer", lambda: c.reconfig(joining=with_role(other, "observer"), leaving=None, new_members=None))
step("observer-to-participant", lambda: c.reconfig(joining=with_role(other, "participant"), leaving=None, new_members=None))
step("remove-other", lambda: c.reconfig(joining=None, leaving=str(other), new_members=None))
current = c.get("/zookeeper/config")[0].decode().split("\n")
members = [l for l in current if l.startswith("server.")] + ["server.7=" + spec(0, "observer")]
step("members", lambda: c.reconfig(joining=None, leaving=None, new_members=",".join(members)))
step("final", lambda: c.get("/zookeeper/config"))
c.stop()
anon.stop()
