import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.state.SessionConnectionStateErrorPolicy;
import org.apache.curator.retry.RetryForever;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.data.Stat;

/**
 * Two Curator sessions riding out leader failovers (internal/cluster).
 *
 * Usage: FailoverSessions CONNECT TIMEOUT_MS BASE
 *
 * Both clients run a LeaderLatch on BASE/latch and hold ephemerals, keep
 * creating ephemeral-sequential nodes, setting data and reading after
 * sync, and bump BASE/progress/curator. The clients use Curator's
 * SessionConnectionStateErrorPolicy: only a lost session counts as an
 * error, so a latch keeps its leadership while SUSPENDED, which is what a
 * server that keeps sessions across failovers makes safe. When BASE/done
 * appears each checks its session and ephemerals and one line
 * "REPORT {json}" goes to stdout; the Go test judges it.
 */
public class FailoverSessions {
    static final Object mu = new Object();
    static final List<String> states = new ArrayList<>();
    static final List<String> errors = new ArrayList<>();
    static final AtomicInteger lost = new AtomicInteger();
    static final AtomicInteger leaders = new AtomicInteger();
    static final AtomicInteger maxLeaders = new AtomicInteger();
    static final AtomicInteger leadershipLost = new AtomicInteger();
    static final AtomicLong maxReattachMs = new AtomicLong();
    static volatile boolean stop;

    static class Tracked {
        final String name;
        final CuratorFramework client;
        final LeaderLatch latch;
        final List<String> created = new ArrayList<>();
        volatile long suspendedAt = -1;
        long sessionId;

        Tracked(String name, String connect, int timeoutMs, String base) {
            this.name = name;
            client = CuratorFrameworkFactory.builder()
                    .connectString(connect)
                    .sessionTimeoutMs(timeoutMs)
                    .connectionTimeoutMs(timeoutMs)
                    .retryPolicy(new RetryForever(200))
                    .connectionStateErrorPolicy(new SessionConnectionStateErrorPolicy())
                    .build();
            client.getConnectionStateListenable().addListener((c, s) -> onState(s));
            latch = new LeaderLatch(client, base + "/latch", "curator-" + name);
            latch.addListener(new LeaderLatchListener() {
                public void isLeader() {
                    int n = leaders.incrementAndGet();
                    maxLeaders.accumulateAndGet(n, Math::max);
                }

                public void notLeader() {
                    leaders.decrementAndGet();
                    leadershipLost.incrementAndGet();
                }
            });
        }

        void onState(ConnectionState s) {
            long now = System.nanoTime();
            synchronized (mu) {
                states.add(name + ":" + s);
            }
            if (s == ConnectionState.LOST) {
                lost.incrementAndGet();
            } else if (s == ConnectionState.SUSPENDED) {
                suspendedAt = now;
            } else if (s == ConnectionState.RECONNECTED && suspendedAt >= 0) {
                long waited = TimeUnit.NANOSECONDS.toMillis(now - suspendedAt);
                maxReattachMs.accumulateAndGet(waited, Math::max);
                suspendedAt = -1;
            }
        }

        void work(String base) {
            String mine = base + "/eph/curator-" + name;
            for (int n = 1; !stop; n++) {
                try {
                    String p = client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL)
                            .forPath(base + "/seq/curator-" + name + "-", "x".getBytes());
                    synchronized (created) {
                        created.add(p);
                    }
                    client.setData().forPath(mine, Integer.toString(n).getBytes());
                    client.sync().forPath(mine);
                    client.getData().forPath(mine);
                    if (name.equals("a")) {
                        client.setData().forPath(base + "/progress/curator", Integer.toString(n).getBytes());
                    }
                } catch (Exception e) {
                    synchronized (mu) {
                        if (errors.size() < 20) {
                            errors.add(name + ": " + e);
                        }
                    }
                }
            }
        }
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String list(List<String> l) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < l.size(); i++) {
            b.append(i == 0 ? "" : ",").append(quote(l.get(i)));
        }
        return b.append("]").toString();
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String base = args[2];
        Tracked[] ts = {new Tracked("a", connect, timeoutMs, base), new Tracked("b", connect, timeoutMs, base)};
        List<String> sessions = new ArrayList<>();
        for (Tracked t : ts) {
            t.client.start();
            if (!t.client.blockUntilConnected(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("client " + t.name + " never connected");
            }
            t.sessionId = t.client.getZookeeperClient().getZooKeeper().getSessionId();
            sessions.add(String.format("0x%x", t.sessionId));
            t.client.create().orSetData().creatingParentsIfNeeded().forPath(base + "/progress/curator");
            t.client.create().orSetData().creatingParentsIfNeeded().forPath(base + "/seq");
            t.client.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL)
                    .forPath(base + "/eph/curator-" + t.name, "0".getBytes());
            t.latch.start();
        }
        long led = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!ts[0].latch.hasLeadership() && !ts[1].latch.hasLeadership()) {
            if (System.nanoTime() > led) {
                throw new IllegalStateException("no latch ever led");
            }
            Thread.sleep(50);
        }
        String leaderAtStart = ts[0].latch.hasLeadership() ? "a" : "b";
        List<Thread> workers = new ArrayList<>();
        for (Tracked t : ts) {
            Thread w = new Thread(() -> t.work(base));
            w.setDaemon(true);
            w.start();
            workers.add(w);
        }
        ts[0].client.create().orSetData().creatingParentsIfNeeded().forPath(base + "/ready/curator");

        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
        while (System.nanoTime() < deadline) {
            try {
                if (ts[0].client.checkExists().forPath(base + "/done") != null) {
                    break;
                }
            } catch (Exception e) {
                // connection trouble: look again
            }
            Thread.sleep(200);
        }
        stop = true;
        for (Thread w : workers) {
            w.join();
        }

        List<String> missing = new ArrayList<>();
        int ephemerals = 0;
        boolean sameSessions = true;
        for (Tracked t : ts) {
            long sid = t.client.getZookeeperClient().getZooKeeper().getSessionId();
            sameSessions &= sid == t.sessionId;
            synchronized (t.created) {
                for (String p : t.created) {
                    Stat st = t.client.checkExists().forPath(p);
                    if (st == null || st.getEphemeralOwner() != t.sessionId) {
                        missing.add(p);
                    }
                }
                ephemerals += t.created.size();
            }
        }
        int leading = 0;
        String leaderAtEnd = "";
        for (Tracked t : ts) {
            if (t.latch.hasLeadership()) {
                leading++;
                leaderAtEnd += t.name;
            }
        }
        synchronized (mu) {
            System.out.println("REPORT {\"client\":\"curator\",\"sessions\":" + list(sessions)
                    + ",\"expired\":" + lost.get()
                    + ",\"same_sessions\":" + sameSessions
                    + ",\"states\":" + list(states)
                    + ",\"max_reattach_ms\":" + maxReattachMs.get()
                    + ",\"ephemerals\":" + ephemerals
                    + ",\"missing\":" + list(missing)
                    + ",\"leading_at_end\":" + leading
                    + ",\"leader_at_start\":" + quote(leaderAtStart)
                    + ",\"leader_at_end\":" + quote(leaderAtEnd)
                    + ",\"max_leaders\":" + maxLeaders.get()
                    + ",\"leadership_lost\":" + leadershipLost.get()
                    + ",\"errors\":" + list(errors) + "}");
        }
        System.out.flush();
        for (Tracked t : ts) {
            t.latch.close();
            t.client.close();
        }
    }
}
