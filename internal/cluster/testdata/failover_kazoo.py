"""Two kazoo sessions riding out leader failovers (internal/cluster).

Usage: failover_kazoo.py HOSTS TIMEOUT_SECONDS BASE

Session "a" holds a kazoo Lock and ephemerals; session "b" waits for the
same lock. Both keep creating ephemeral-sequential nodes, setting data and
reading after sync, and bump BASE/progress/kazoo so the test can see them
work between faults. When BASE/done appears, session "a" checks that it
still holds the lock and that every ephemeral it was told it created is
there and its own, then releases the lock, which "b" must then get. One
line "REPORT {json}" goes to stdout; the Go test judges it.
"""
import json
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.retry import KazooRetry

hosts, timeout, base = sys.argv[1], float(sys.argv[2]), sys.argv[3]

report = {"client": "kazoo", "sessions": [], "expired": 0, "states": [],
          "max_reattach_ms": 0, "ephemerals": 0, "missing": [],
          "lock_doubled": False, "lock_held_at_end": False,
          "contender_got_lock_after_release": False, "errors": []}
mu = threading.Lock()
stop = threading.Event()


class Tracked:
    def __init__(self, name):
        self.name = name
        self.client = KazooClient(
            hosts=hosts, timeout=timeout,
            connection_retry=KazooRetry(max_tries=-1, max_delay=2),
            command_retry=KazooRetry(max_tries=-1, max_delay=1))
        self.suspended_at = None
        self.created = []
        self.client.add_listener(self.on_state)

    def on_state(self, state):
        now = time.monotonic()
        with mu:
            report["states"].append("%s:%s" % (self.name, state))
            if state == KazooState.LOST:
                report["expired"] += 1
            elif state == KazooState.SUSPENDED:
                self.suspended_at = now
            elif state == KazooState.CONNECTED and self.suspended_at is not None:
                waited = int((now - self.suspended_at) * 1000)
                report["max_reattach_ms"] = max(report["max_reattach_ms"], waited)
                self.suspended_at = None

    def work(self):
        c, n = self.client, 0
        mine = "%s/eph/kazoo-%s" % (base, self.name)
        while not stop.is_set():
            n += 1
            try:
                p = c.retry(c.create, "%s/seq/kazoo-%s-" % (base, self.name),
                            b"x", ephemeral=True, sequence=True)
                self.created.append(p)
                c.retry(c.set, mine, str(n).encode())
                c.retry(c.sync, mine)
                c.retry(c.get, mine)
                if self.name == "a":
                    c.retry(c.set, base + "/progress/kazoo", str(n).encode())
            except KazooException as e:
                with mu:
                    report["error_count"] = report.get("error_count", 0) + 1
                    if len(report["errors"]) < 20:
                        report["errors"].append("%s: %r" % (self.name, e))
                time.sleep(0.1)


a, b = Tracked("a"), Tracked("b")
for t in (a, b):
    t.client.start(timeout=60)
    t.client.ensure_path(base + "/seq")
    t.client.ensure_path(base + "/progress/kazoo")
    t.client.create("%s/eph/kazoo-%s" % (base, t.name), b"0", ephemeral=True, makepath=True)
    report["sessions"].append("0x%x" % t.client.client_id[0])

holding = threading.Event()
lock_a = a.client.Lock(base + "/lock", "kazoo-a")
lock_a.acquire(timeout=60)
holding.set()
lock_b = b.client.Lock(base + "/lock", "kazoo-b")
b_got = threading.Event()


def contend():
    try:
        if lock_b.acquire(timeout=300):
            with mu:
                if holding.is_set():
                    report["lock_doubled"] = True
            b_got.set()
    except Exception as e:  # reported, judged by the test
        with mu:
            report["errors"].append("contender: %r" % (e,))


threading.Thread(target=contend, daemon=True).start()
workers = [threading.Thread(target=t.work, daemon=True) for t in (a, b)]
for w in workers:
    w.start()
try:
    a.client.create(base + "/ready/kazoo", makepath=True)
except NodeExistsError:
    pass

deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    try:
        if a.client.exists(base + "/done"):
            break
    except KazooException:
        pass
    time.sleep(0.2)
stop.set()
for w in workers:
    w.join()

for t in (a, b):
    sid = t.client.client_id[0]
    for p in t.created:
        st = t.client.retry(t.client.exists, p)
        if st is None or st.ephemeralOwner != sid:
            report["missing"].append(p)
    report["ephemerals"] += len(t.created)
lock_node = a.client.retry(a.client.exists, base + "/lock/" + lock_a.node)
report["lock_held_at_end"] = bool(
    lock_a.is_acquired and lock_node is not None
    and lock_node.ephemeralOwner == a.client.client_id[0])
holding.clear()
lock_a.release()
report["contender_got_lock_after_release"] = b_got.wait(60)
print("REPORT " + json.dumps(report), flush=True)
for t in (a, b):
    t.client.stop()
    t.client.close()
