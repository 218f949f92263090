// CuratorRecipes drives Curator 5's recipes against a server and prints one
// "ok <recipe>" line for each that kept its guarantee; any failure throws.
// Usage: CuratorRecipes host:port
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.watch.PersistentWatcher;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;

public class CuratorRecipes {
    static final int WAIT = 60;

    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 15000, 15000, new ExponentialBackoffRetry(100, 5));
        c.start();
        if (!c.blockUntilConnected(WAIT, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + connect);
        }
        return c;
    }

    // awaitSeen takes the cache's reports of /curator/cache's children into
    // got until want is among them.
    static void awaitSeen(BlockingQueue<String> seen, List<String> got, String want) throws InterruptedException {
        while (!got.contains(want)) {
            String s = seen.poll(WAIT, TimeUnit.SECONDS);
            check(s != null, "waiting for \"" + want + "\", cache saw only " + got);
            if (s.startsWith("create /curator/cache/") || s.startsWith("change /curator/cache/") || s.startsWith("delete /curator/cache/")) {
                got.add(s);
            }
        }
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            clients.add(client(connect));
        }
        CuratorFramework zk = clients.get(0);

        // InterProcessMutex under contention.
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger maxInside = new AtomicInteger();
        AtomicInteger total = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (CuratorFramework c : clients) {
            Thread t = new Thread(() -> {
                InterProcessMutex m = new InterProcessMutex(c, "/curator/lock");
                try {
                    for (int i = 0; i < 10; i++) {
                        check(m.acquire(WAIT, TimeUnit.SECONDS), "lock not acquired");
                        int n = inside.incrementAndGet();
                        maxInside.accumulateAndGet(n, Math::max);
                        Thread.sleep(1);
                        inside.decrementAndGet();
                        total.incrementAndGet();
                        m.release();
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        check(maxInside.get() == 1 && total.get() == 30, "mutex: max inside " + maxInside + ", total " + total);
        System.out.println("ok InterProcessMutex");

        // The lock's parent is a container: the reaper removes it once empty.
        long deadline = System.currentTimeMillis() + WAIT * 1000L;
        while (zk.checkExists().forPath("/curator/lock") != null && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        check(zk.checkExists().forPath("/curator/lock") == null, "empty container parent not reaped");
        System.out.println("ok container parents");

        // LeaderLatch: one leader; closing it elects the other.
        LeaderLatch a = new LeaderLatch(clients.get(1), "/curator/leader", "a");
        LeaderLatch b = new LeaderLatch(clients.get(2), "/curator/leader", "b");
        a.start();
        check(a.await(WAIT, TimeUnit.SECONDS), "a never led");
        b.start();
        check(!b.hasLeadership(), "two leaders");
        a.close();
        check(b.await(WAIT, TimeUnit.SECONDS), "b never took over");
        b.close();
        System.out.println("ok LeaderLatch");

        // CuratorCache sees another client's create, change and delete.
        // Each step waits for the cache to report the one before: the
        // cache reads a node when told it was created or changed, and a
        // node deleted before that read never enters the cache, so its
        // delete is not reported either (on ZooKeeper as on Janus).
        BlockingQueue<String> seen = new LinkedBlockingQueue<>();
        zk.create().forPath("/curator/cache");
        try (CuratorCache cache = CuratorCache.build(zk, "/curator/cache")) {
            CountDownLatch primed = new CountDownLatch(1);
            cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(n -> seen.add("create " + n.getPath()))
                .forChanges((o, n) -> seen.add("change " + n.getPath() + " " + new String(n.getData())))
                .forDeletes(n -> seen.add("delete " + n.getPath()))
                .forInitialized(primed::countDown)
                .build());
            cache.start();
            check(primed.await(WAIT, TimeUnit.SECONDS), "cache not initialized");
            CuratorFramework other = clients.get(1);
            List<String> got = new ArrayList<>();
            other.create().forPath("/curator/cache/x", "1".getBytes());
            awaitSeen(seen, got, "create /curator/cache/x");
            other.setData().forPath("/curator/cache/x", "2".getBytes());
            awaitSeen(seen, got, "change /curator/cache/x 2");
            other.delete().forPath("/curator/cache/x");
            awaitSeen(seen, got, "delete /curator/cache/x");
            check(got.equals(List.of("create /curator/cache/x", "change /curator/cache/x 2", "delete /curator/cache/x")), "cache saw " + got);
        }
        System.out.println("ok CuratorCache");

        // PersistentWatcher (addWatch, recursive) keeps firing.
        BlockingQueue<WatchedEvent> events = new LinkedBlockingQueue<>();
        zk.create().forPath("/curator/pw");
        try (PersistentWatcher pw = new PersistentWatcher(zk, "/curator/pw", true)) {
            pw.getListenable().addListener(events::add);
            pw.start();
            CuratorFramework other = clients.get(2);
            // The recipe sets its watch in the background: changes until
            // the first is reported may go unseen, so a probe node is
            // created and removed until one is.
            long probeDeadline = System.currentTimeMillis() + WAIT * 1000L;
            boolean watching = false;
            while (!watching && System.currentTimeMillis() < probeDeadline) {
                other.create().forPath("/curator/pw/probe");
                other.delete().forPath("/curator/pw/probe");
                WatchedEvent ev = events.poll(100, TimeUnit.MILLISECONDS);
                watching = ev != null && "/curator/pw/probe".equals(ev.getPath());
            }
            check(watching, "persistent watcher never fired");
            other.create().forPath("/curator/pw/a");
            other.setData().forPath("/curator/pw/a", "x".getBytes());
            other.delete().forPath("/curator/pw/a");
            List<String> got = new ArrayList<>();
            while (got.size() < 3) {
                WatchedEvent ev = events.poll(WAIT, TimeUnit.SECONDS);
                check(ev != null, "persistent watcher saw only " + got);
                if (ev.getType() != Watcher.Event.EventType.None && "/curator/pw/a".equals(ev.getPath())) {
                    got.add(ev.getType() + " " + ev.getPath());
                }
            }
            check(got.equals(List.of("NodeCreated /curator/pw/a", "NodeDataChanged /curator/pw/a", "NodeDeleted /curator/pw/a")), "persistent watcher saw " + got);
        }
        System.out.println("ok PersistentWatcher");

        // Digest authentication: a client built with Curator's
        // authorization() creates a node only its digest identity may
        // read; a client without it is refused with NoAuth.
        CuratorFramework alice = CuratorFrameworkFactory.builder().connectString(connect)
            .sessionTimeoutMs(15000).connectionTimeoutMs(15000).retryPolicy(new ExponentialBackoffRetry(100, 5))
            .authorization("digest", "alice:secret".getBytes()).build();
        alice.start();
        check(alice.blockUntilConnected(WAIT, TimeUnit.SECONDS), "alice not connected");
        String aliceID = DigestAuthenticationProvider.generateDigest("alice:secret");
        alice.create().withACL(List.of(new ACL(ZooDefs.Perms.ALL, new Id("digest", aliceID)))).forPath("/curator/alice", "hers".getBytes());
        check(new String(alice.getData().forPath("/curator/alice")).equals("hers"), "alice cannot read her node");
        try {
            zk.getData().forPath("/curator/alice");
            check(false, "a client without alice's digest read her node");
        } catch (KeeperException.NoAuthException expected) {
        }
        alice.delete().forPath("/curator/alice");
        alice.close();
        System.out.println("ok digest");

        for (CuratorFramework c : clients) {
            c.close();
        }
    }
}
