# A kazoo Lock user for the migration tests: takes the lock `rounds` times
# and, while holding it, holds a referee file created with O_EXCL, so two
# holders at once (on one ensemble or across two) fail loudly. Prints one
# line per acquisition: "held <id> <lock node>".
#
# usage: kazoo_lock_worker.py HOSTS LOCKPATH ID REFEREE ROUNDS
import os
import sys
import time

from kazoo.client import KazooClient

hosts, path, ident, referee, rounds = sys.argv[1:6]
zk = KazooClient(hosts=hosts, timeout=10)
zk.start(timeout=30)
lock = zk.Lock(path, ident)
for _ in range(int(rounds)):
    with lock:
        try:
            fd = os.open(referee, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            print("VIOLATION", ident, lock.node, flush=True)
            sys.exit(2)
        print("held", ident, lock.node, flush=True)
        time.sleep(0.005)  # hold it across a scheduling point
        os.close(fd)
        os.remove(referee)
zk.stop()
zk.close()
