import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

// CuratorLocks takes an InterProcessMutex on <base>/mutex, leadership of
// a LeaderLatch on <base>/latch and of a LeaderSelector on
// <base>/selector, prints "ready", and holds them until its stdin closes:
// the console's test then reads them in the locks view.
public class CuratorLocks {
    public static void main(String[] args) throws Exception {
        String servers = args[0], base = args[1];
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(servers, new ExponentialBackoffRetry(200, 10))) {
            client.start();
            client.blockUntilConnected();
            InterProcessMutex mutex = new InterProcessMutex(client, base + "/mutex");
            mutex.acquire();
            LeaderLatch latch = new LeaderLatch(client, base + "/latch", "curator-leader");
            latch.start();
            latch.await();
            CountDownLatch leading = new CountDownLatch(1), release = new CountDownLatch(1);
            LeaderSelector selector = new LeaderSelector(client, base + "/selector", new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework c) throws Exception {
                    leading.countDown();
                    release.await();
                }
            });
            selector.start();
            leading.await();
            System.out.println("ready");
            System.out.flush();
            while (System.in.read() >= 0) {
            }
            release.countDown();
            selector.close();
            latch.close();
            mutex.release();
        }
    }
}
