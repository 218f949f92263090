// CuratorSASL logs in to a ZooKeeper server with SASL DIGEST-MD5 the way
// Kafka and HBase do (a JAAS DigestLoginModule section naming the user and
// password), and prints what each client sees: a SASL user creating a node
// only it may use, a client without SASL refused it, and a client with a
// wrong password. Usage: CuratorSASL host:port jaas-file path
import java.util.LinkedHashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.CuratorEventType;
import org.apache.curator.retry.RetryOneTime;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.client.ZKClientConfig;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;

public class CuratorSASL {
    // states records the connection states a client's watcher saw, each once.
    static CuratorFramework client(String connect, String section, Set<String> states) throws Exception {
        ZKClientConfig zc = new ZKClientConfig();
        if (section == null) {
            zc.setProperty(ZKClientConfig.ENABLE_CLIENT_SASL_KEY, "false");
        } else {
            zc.setProperty(ZKClientConfig.LOGIN_CONTEXT_NAME_KEY, section);
        }
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect)
            .sessionTimeoutMs(15000).connectionTimeoutMs(10000)
            .retryPolicy(new RetryOneTime(500)).zkClientConfig(zc).build();
        c.getCuratorListenable().addListener((cf, ev) -> {
            if (ev.getType() == CuratorEventType.WATCHED && ev.getWatchedEvent().getPath() == null) {
                synchronized (states) {
                    states.add(ev.getWatchedEvent().getState().toString());
                }
            }
        });
        c.start();
        return c;
    }

    static String outcome(Exception e) {
        if (e instanceof KeeperException) {
            return ((KeeperException) e).code().toString();
        }
        return e.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[2];
        System.setProperty("java.security.auth.login.config", args[1]);

        Set<String> kafkaStates = new LinkedHashSet<>();
        CuratorFramework kafka = client(connect, "KafkaClient", kafkaStates);
        kafka.blockUntilConnected(60, TimeUnit.SECONDS);
        ACL only = new ACL(ZooDefs.Perms.ALL, new Id("sasl", "kafka"));
        kafka.create().withACL(java.util.List.of(only)).forPath(path, "k".getBytes());
        System.out.println("kafka get: " + new String(kafka.getData().forPath(path)));
        System.out.println("kafka acl: " + kafka.getACL().forPath(path));
        System.out.println("kafka whoAmI: " + kafka.getZookeeperClient().getZooKeeper().whoAmI());

        CuratorFramework anon = client(connect, null, new LinkedHashSet<>());
        anon.blockUntilConnected(60, TimeUnit.SECONDS);
        try {
            anon.getData().forPath(path);
            System.out.println("anonymous get: ok");
        } catch (Exception e) {
            System.out.println("anonymous get: " + outcome(e));
        }
        try {
            anon.setData().forPath(path, "a".getBytes());
            System.out.println("anonymous set: ok");
        } catch (Exception e) {
            System.out.println("anonymous set: " + outcome(e));
        }
        anon.close();

        Set<String> wrongStates = new LinkedHashSet<>();
        CuratorFramework wrong = client(connect, "WrongPassword", wrongStates);
        try {
            wrong.getData().forPath(path);
            System.out.println("wrong password get: ok");
        } catch (Exception e) {
            System.out.println("wrong password get: " + outcome(e));
        }
        wrong.close();
        kafka.close();
        synchronized (kafkaStates) {
            System.out.println("kafka states: " + kafkaStates);
        }
        synchronized (wrongStates) {
            System.out.println("wrong password states: " + wrongStates);
        }
    }
}
