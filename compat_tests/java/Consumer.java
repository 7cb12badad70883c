// One member of a consumer group for the compatibility tests (run by test_groups_clients.py):
//
//     java -cp '.deps/kafka-clients-3.9/*' compat_tests/java/Consumer.java BOOTSTRAP TOPIC GROUP [key=value ...]
//
// key=value pairs are consumer configs (partition.assignment.strategy, group.protocol, ...). It
// subscribes, reads from the earliest offset when nothing is committed, commits synchronously after
// every batch (again at the next poll if that failed) and prints the same JSON lines as compat_tests/group_member.py:
//   {"ev":"assigned","partitions":[0,3]}  {"ev":"record","p":0,"o":12,"v":"0-12"}
//   {"ev":"commit","offsets":{"0":13}}   {"ev":"closed"}   (each with "t": seconds since the epoch)
// SIGTERM closes the consumer cleanly (LeaveGroup); SIGKILL is a crash.

import java.time.Duration;
import java.util.*;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class Consumer {
    static synchronized void emit(String ev, String fields) {
        double t = System.currentTimeMillis() / 1000.0;
        System.out.println("{\"ev\":\"" + ev + "\"" + (fields.isEmpty() ? "" : "," + fields) + ",\"t\":" + t + "}");
        System.out.flush();
    }

    static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        for (int i = 3; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props);
        CountDownLatch closed = new CountDownLatch(1);
        Thread mainThread = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        consumer.subscribe(List.of(args[1]));
        List<Integer> last = null;
        Map<Integer, Long> pending = new TreeMap<>();  // offsets read and not yet committed
        try {
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                List<Integer> now = new ArrayList<>();
                for (TopicPartition tp : consumer.assignment()) now.add(tp.partition());
                Collections.sort(now);
                if (!now.equals(last)) {
                    last = now;
                    emit("assigned", "\"partitions\":" + now);
                }
                for (ConsumerRecord<String, String> r : records) {
                    emit("record", "\"p\":" + r.partition() + ",\"o\":" + r.offset() + ",\"v\":" + quote(r.value()));
                    pending.put(r.partition(), r.offset() + 1);
                }
                // A commit that failed (a rebalance under way) is tried again at the next poll, even
                // if no new record comes, for the partitions still assigned; a revoked partition's
                // offsets are dropped, so its next owner reads from what was really committed.
                pending.keySet().retainAll(now);
                if (!pending.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (Map.Entry<Integer, Long> e : pending.entrySet()) {
                        offsets.put(new TopicPartition(args[1], e.getKey()), new OffsetAndMetadata(e.getValue()));
                    }
                    try {
                        consumer.commitSync(offsets);
                        StringBuilder sb = new StringBuilder();
                        for (Map.Entry<Integer, Long> e : pending.entrySet()) {
                            if (sb.length() > 0) sb.append(',');
                            sb.append('"').append(e.getKey()).append("\":").append(e.getValue());
                        }
                        emit("commit", "\"offsets\":{" + sb + "}");
                        pending.clear();
                    } catch (WakeupException e) {
                        throw e;
                    } catch (Exception e) {
                        emit("commit_failed", "\"error\":" + quote(e.toString()));
                    }
                }
            }
        } catch (WakeupException e) {
            // SIGTERM: leave the group below
        } finally {
            consumer.close();
            emit("closed", "");
            closed.countDown();
        }
    }
}
