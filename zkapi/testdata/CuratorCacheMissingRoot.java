// CuratorCacheMissingRoot starts a CuratorCache on a path that does not
// exist yet, lets another client create a node below it (creating the root
// on the way), change it, delete it and the root, and prints every event
// the cache reported, in order. Usage: CuratorCacheMissingRoot host:port root
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorCacheMissingRoot {
    static final int WAIT = 60;

    static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 15000, 15000, new ExponentialBackoffRetry(100, 5));
        c.start();
        if (!c.blockUntilConnected(WAIT, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + connect);
        }
        return c;
    }

    // await prints the cache's events until want, or what came before a
    // minute without it.
    static void await(BlockingQueue<String> seen, String want) throws InterruptedException {
        while (true) {
            String s = seen.poll(WAIT, TimeUnit.SECONDS);
            if (s == null) {
                System.out.println("timed out waiting for " + want);
                return;
            }
            System.out.println(s);
            if (s.equals(want)) {
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0], root = args[1];
        CuratorFramework zk = client(connect), other = client(connect);
        BlockingQueue<String> seen = new LinkedBlockingQueue<>();
        try (CuratorCache cache = CuratorCache.build(zk, root)) {
            CountDownLatch primed = new CountDownLatch(1);
            cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(n -> seen.add("create " + n.getPath()))
                .forChanges((o, n) -> seen.add("change " + n.getPath() + " " + new String(n.getData())))
                .forDeletes(n -> seen.add("delete " + n.getPath()))
                .forInitialized(primed::countDown)
                .build());
            cache.start();
            if (!primed.await(WAIT, TimeUnit.SECONDS)) {
                throw new IllegalStateException("cache not initialized");
            }
            System.out.println("initialized");
            // Each write waits until the cache has reported it, so what the
            // cache reads back is the state that write left (a cache that
            // reads late folds a change into the create, or misses it).
            other.create().creatingParentsIfNeeded().forPath(root + "/x", "1".getBytes());
            await(seen, "create " + root + "/x");
            other.setData().forPath(root + "/x", "2".getBytes());
            await(seen, "change " + root + "/x 2");
            other.delete().forPath(root + "/x");
            await(seen, "delete " + root + "/x");
            other.delete().forPath(root);
            await(seen, "delete " + root);
        }
        System.out.println("done");
    }
}
