// CuratorSmoke takes and releases an InterProcessMutex through Curator 5,
// printing what it observes, so a Go test can check Curator runs against a
// server. Usage: CuratorSmoke host:port lockPath
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;

public class CuratorSmoke {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String lockPath = args[1];
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(
                connect, 15000, 15000, new ExponentialBackoffRetry(100, 5))) {
            client.start();
            if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("not connected to " + connect);
            }
            InterProcessMutex mutex = new InterProcessMutex(client, lockPath);
            if (!mutex.acquire(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("lock not acquired");
            }
            List<String> held = client.getChildren().forPath(lockPath);
            System.out.println("acquired, lock nodes: " + held.size());
            mutex.release();
            // The lock's parent is a container node: once empty, the server
            // may delete it at any moment, which counts as no lock nodes.
            int left = 0;
            try {
                left = client.getChildren().forPath(lockPath).size();
            } catch (KeeperException.NoNodeException gone) {
                left = 0;
            }
            System.out.println("released, lock nodes: " + left);
        }
    }
}
