import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

// CuratorLocks takes an InterProcessMutex on <base>/mutex and leadership
// of a LeaderLatch on <base>/latch, prints "ready", and holds both until
// its stdin closes: the console's test then reads them in the locks view.
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
            System.out.println("ready");
            System.out.flush();
            while (System.in.read() >= 0) {
            }
            latch.close();
            mutex.release();
        }
    }
}
