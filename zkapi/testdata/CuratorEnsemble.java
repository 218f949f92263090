// CuratorEnsemble connects Curator to one server of an ensemble and prints
// the connection string its EnsembleTracker derives from /zookeeper/config,
// then reconfigures the ensemble through Curator (as super) to add an
// observer and prints the connection string the tracker follows it to.
// Usage: CuratorEnsemble host:port super-password joiner-spec joiner-client-addr
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorEnsemble {
    static final int WAIT = 60;

    // awaitConnectString waits until the tracker's connection string names
    // want, and prints it sorted.
    static void awaitConnectString(CuratorFramework c, String want) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT);
        String cs = c.getZookeeperClient().getCurrentConnectionString();
        while (!cs.contains(want) && System.nanoTime() < deadline) {
            Thread.sleep(50);
            cs = c.getZookeeperClient().getCurrentConnectionString();
        }
        String[] hosts = cs.split(",");
        Arrays.sort(hosts);
        System.out.println("connect " + String.join(",", hosts));
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0], password = args[1], joiner = args[2], joinerClient = args[3];
        CuratorFramework c = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(15000).connectionTimeoutMs(15000)
            .retryPolicy(new ExponentialBackoffRetry(100, 5))
            .authorization("digest", ("super:" + password).getBytes())
            .build();
        c.start();
        if (!c.blockUntilConnected(WAIT, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + connect);
        }
        awaitConnectString(c, ",");
        System.out.println("config " + new String(c.getConfig().forEnsemble()).replace("\n", " "));
        byte[] next = c.reconfig().joining(joiner).fromConfig(-1).forEnsemble();
        System.out.println("reconfig " + new String(next).replace("\n", " "));
        awaitConnectString(c, joinerClient);
        c.close();
    }
}
