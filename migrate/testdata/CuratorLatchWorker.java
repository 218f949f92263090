import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * A Curator LeaderLatch user for the migration tests: becomes leader
 * `rounds` times and, while leader, holds a referee file created
 * exclusively, so two leaders at once (on one ensemble or across two) fail
 * loudly. Prints one line per leadership: "held ID LATCHNODE".
 *
 * usage: CuratorLatchWorker CONNECT LATCHPATH ID REFEREE ROUNDS
 */
public class CuratorLatchWorker {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], id = args[2];
        Path referee = Paths.get(args[3]);
        int rounds = Integer.parseInt(args[4]);
        try (CuratorFramework client = CuratorFrameworkFactory.newClient(connect, new ExponentialBackoffRetry(100, 10))) {
            client.start();
            client.blockUntilConnected();
            for (int i = 0; i < rounds; i++) {
                LeaderLatch latch = new LeaderLatch(client, path, id);
                latch.start();
                latch.await();
                try {
                    Files.createFile(referee);
                } catch (FileAlreadyExistsException e) {
                    System.out.println("VIOLATION " + id + " " + latch.getOurPath());
                    System.exit(2);
                }
                System.out.println("held " + id + " " + latch.getOurPath());
                System.out.flush();
                Thread.sleep(5); // hold it across a scheduling point
                Files.delete(referee);
                latch.close();
            }
        }
    }
}
