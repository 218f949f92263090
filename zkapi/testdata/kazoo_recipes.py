# Runs kazoo's recipes against the server at sys.argv[1] and prints one
# "ok <recipe>" line per recipe that behaved; any failure raises.
import faulthandler
import os
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.recipe.barrier import Barrier, DoubleBarrier
from kazoo.recipe.counter import Counter
from kazoo.recipe.election import Election
from kazoo.recipe.lock import Lock, Semaphore
from kazoo.recipe.party import Party
from kazoo.recipe.queue import LockingQueue, Queue
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

hosts = sys.argv[1]
TIMEOUT = 30


def client():
    c = KazooClient(hosts=hosts, timeout=10)
    c.start(timeout=TIMEOUT)
    return c


clients = [client() for _ in range(4)]
zk = clients[0]


def dump_tree(path):
    try:
        kids = sorted(zk.get_children(path))
    except Exception as e:
        print("  %s: %r" % (path, e), file=sys.stderr)
        return
    print("  %s %s" % (path, kids), file=sys.stderr)
    for k in kids:
        dump_tree(path.rstrip("/") + "/" + k)


def join_all(threads, recipe):
    """Joins a recipe's threads; if one is stuck, prints every thread's
    stack and the znode tree and exits, rather than letting the
    interpreter wait for it at exit."""
    for t in threads:
        t.join(TIMEOUT)
    if any(t.is_alive() for t in threads):
        print("%s: a thread is stuck; stacks and znodes follow" % recipe, file=sys.stderr)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        dump_tree("/recipes")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)

# Lock under contention: mutual exclusion checked with a shared counter.
inside = [0]
max_inside = [0]
total = [0]
guard = threading.Lock()


def worker(c, n):
    lock = Lock(c, "/recipes/lock")
    for _ in range(n):
        with lock:
            with guard:
                inside[0] += 1
                max_inside[0] = max(max_inside[0], inside[0])
            time.sleep(0.001)
            with guard:
                inside[0] -= 1
                total[0] += 1


threads = [threading.Thread(target=worker, args=(c, 10)) for c in clients]
for t in threads:
    t.start()
join_all(threads, "Lock")
assert max_inside[0] == 1, "lock let %d holders in" % max_inside[0]
assert total[0] == 40, total[0]
print("ok Lock")

# Election: exactly one leader at a time, and leadership passes on.
leaders = []
done = threading.Event()


def lead(name):
    leaders.append(name)


elections = [Election(c, "/recipes/election", identifier="c%d" % i) for i, c in enumerate(clients[:2])]
t = threading.Thread(target=elections[0].run, args=(lead, "c0"))
t.start()
join_all([t], "Election")
t = threading.Thread(target=elections[1].run, args=(lead, "c1"))
t.start()
join_all([t], "Election")
assert leaders == ["c0", "c1"], leaders
print("ok Election")

# Barrier
b = Barrier(zk, "/recipes/barrier")
b.create()
passed = threading.Event()
threading.Thread(target=lambda: (Barrier(clients[1], "/recipes/barrier").wait(TIMEOUT), passed.set())).start()
time.sleep(0.2)
assert not passed.is_set(), "barrier passed while up"
b.remove()
assert passed.wait(TIMEOUT), "barrier did not release"
print("ok Barrier")

# DoubleBarrier with 3 participants.
entered = []


def participate(c, i):
    db = DoubleBarrier(c, "/recipes/double", 3)
    db.enter()
    entered.append(i)
    db.leave()


threads = [threading.Thread(target=participate, args=(clients[i], i)) for i in range(3)]
for t in threads:
    t.start()
join_all(threads, "DoubleBarrier")
assert sorted(entered) == [0, 1, 2], entered
print("ok DoubleBarrier")

# Counter, concurrently from every client.
def count(c):
    ctr = Counter(c, "/recipes/counter")
    for _ in range(10):
        ctr += 1


threads = [threading.Thread(target=count, args=(c,)) for c in clients]
for t in threads:
    t.start()
join_all(threads, "Counter")
assert Counter(zk, "/recipes/counter").value == 40, Counter(zk, "/recipes/counter").value
print("ok Counter")

# Queue: FIFO with priorities.
q = Queue(zk, "/recipes/queue")
for item in [b"one", b"two", b"three"]:
    q.put(item)
q.put(b"urgent", priority=1)
got = [q.get() for _ in range(4)]
assert got == [b"urgent", b"one", b"two", b"three"], got
assert q.get() is None
print("ok Queue")

# LockingQueue: get/consume across clients.
lq = LockingQueue(zk, "/recipes/lqueue")
lq.put(b"a")
lq.put(b"b")
lq2 = LockingQueue(clients[1], "/recipes/lqueue")
assert lq2.get(TIMEOUT) == b"a"
assert lq2.consume()
assert lq2.get(TIMEOUT) == b"b"
assert lq2.consume()
assert len(lq) == 0
print("ok LockingQueue")

# Party
parties = [Party(c, "/recipes/party", "m%d" % i) for i, c in enumerate(clients)]
for p in parties:
    p.join()
assert len(parties[0]) == 4, list(parties[0])
parties[3].leave()
assert sorted(parties[0]) == ["m0", "m1", "m2"], list(parties[0])
print("ok Party")

# Semaphore with 2 leases among 4 contenders.
holding = [0]
max_holding = [0]


def sem(c):
    s = Semaphore(c, "/recipes/sem", max_leases=2)
    for _ in range(3):
        with s:
            with guard:
                holding[0] += 1
                max_holding[0] = max(max_holding[0], holding[0])
            time.sleep(0.005)
            with guard:
                holding[0] -= 1


threads = [threading.Thread(target=sem, args=(c,)) for c in clients]
for t in threads:
    t.start()
join_all(threads, "Semaphore")
assert max_holding[0] <= 2, max_holding[0]
print("ok Semaphore")

# DataWatch and ChildrenWatch see every change made by another client.
seen_data = []
seen_kids = []
data_ev = threading.Event()
kids_ev = threading.Event()
zk.ensure_path("/recipes/watched")


@DataWatch(zk, "/recipes/watched")
def on_data(data, stat):
    seen_data.append(data)
    if data == b"v3":
        data_ev.set()


@ChildrenWatch(zk, "/recipes/watched")
def on_kids(kids):
    seen_kids.append(sorted(kids))
    if sorted(kids) == ["x", "y"]:
        kids_ev.set()


other = clients[1]
for v in [b"v1", b"v2", b"v3"]:
    other.set("/recipes/watched", v)
    time.sleep(0.05)
other.create("/recipes/watched/x")
other.create("/recipes/watched/y")
assert data_ev.wait(TIMEOUT), seen_data
assert kids_ev.wait(TIMEOUT), seen_kids
assert seen_data[-1] == b"v3", seen_data
print("ok DataWatch")
print("ok ChildrenWatch")

for c in clients:
    c.stop()
    c.close()
