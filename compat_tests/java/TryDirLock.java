import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Takes the lock on DIR/.lock the way a Kafka broker does (FileChannel.tryLock on a file opened
 * for reading and writing). Prints "locked" and holds it until stdin closes, or prints "busy" when
 * another process holds it.
 *
 *   java TryDirLock.java DIR
 */
public class TryDirLock {
    public static void main(String[] args) throws Exception {
        Path file = Path.of(args[0], ".lock");
        try (FileChannel channel = FileChannel.open(
                file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            FileLock lock = channel.tryLock();
            if (lock == null) {
                System.out.println("busy");
                return;
            }
            System.out.println("locked");
            System.out.flush();
            while (System.in.read() != -1) {
                // hold the lock until the test closes our stdin
            }
            lock.release();
        }
    }
}
