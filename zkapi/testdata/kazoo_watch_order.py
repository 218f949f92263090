# Checks with kazoo that no watch notification is lost while other sessions
# change what is watched: kazoo registers a watcher when the reply that sets
# it arrives and drops a notification that comes first, after which recipes
# that wait on the watch (Lock, Semaphore) wait forever. Prints
# "ok watch order" or raises.
#
# Each round client a sets a data and a child watch, then changes both nodes
# itself while client b changes them all the time. A notification precedes
# the reply to any later request of the session, so once a's own writes are
# answered kazoo's reader has taken both watchers off its tables; a watcher
# still there is a notification that was lost.
import sys
import threading

from kazoo.client import KazooClient

hosts, rounds = sys.argv[1], int(sys.argv[2])


def client():
    c = KazooClient(hosts=hosts, timeout=10)
    c.start(timeout=30)
    return c


a, b = client(), client()
a.ensure_path("/order/kids")
stop = threading.Event()
failed = []


def churn():
    try:
        while not stop.is_set():
            b.set("/order", b"b")
            b.delete(b.create("/order/kids/b-", ephemeral=True, sequence=True))
    except Exception as e:  # reported by the main thread
        failed.append(e)


t = threading.Thread(target=churn)
t.start()
lost = []
try:
    for i in range(rounds):
        a.get("/order", watch=lambda ev: None)
        a.get_children("/order/kids", watch=lambda ev: None)
        a.set("/order", b"a")
        a.delete(a.create("/order/kids/a-", ephemeral=True, sequence=True))
        if a._data_watchers.get("/order"):
            lost.append((i, "data watch on /order"))
        if a._child_watchers.get("/order/kids"):
            lost.append((i, "child watch on /order/kids"))
        if failed:
            raise failed[0]
finally:
    stop.set()
    t.join()
assert not lost, "notifications lost in %d of %d rounds: %s" % (len(lost), rounds, lost[:5])
print("ok watch order")
a.stop()
b.stop()
