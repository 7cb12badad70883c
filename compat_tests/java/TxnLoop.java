import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional consume-transform-produce loop with the Java client (transactions v2 against a
 * broker that finalizes it: every commit bumps the epoch): TxnLoop BOOTSTRAP INPUT OUTPUT GROUP
 * TXN_ID COUNT OUTPUT_PARTITIONS. Reads INPUT partition 0 (read_committed, as a member of GROUP),
 * writes "out-" + value to OUTPUT partition (value % OUTPUT_PARTITIONS) and sends the offsets, one
 * transaction per poll, beginning the next at once after each commit, until COUNT records went
 * through. Prints {"commits": N} at the end,
 * or {"error": "..."} when the client fails (a fatal error ends the loop).
 */
public class TxnLoop {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        String group = args[3];
        String txnId = args[4];
        long count = Long.parseLong(args[5]);
        int partitions = Integer.parseInt(args[6]);
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("group.id", group);
        c.put("enable.auto.commit", "false");
        c.put("isolation.level", "read_committed");
        c.put("auto.offset.reset", "earliest");
        c.put("max.poll.records", "3");
        c.put("key.deserializer", StringDeserializer.class.getName());
        c.put("value.deserializer", StringDeserializer.class.getName());
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("transaction.timeout.ms", "30000");
        p.put("linger.ms", "0");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        long done = 0;
        int commits = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
             KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            consumer.subscribe(Collections.singletonList(input));
            producer.initTransactions();
            long deadline = System.currentTimeMillis() + 120_000;
            while (done < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                if (records.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                long next = -1;
                for (ConsumerRecord<String, String> r : records) {
                    int to = (int) (Long.parseLong(r.value()) % partitions);
                    producer.send(new ProducerRecord<>(output, to, null, "out-" + r.value()));
                    next = r.offset() + 1;
                    done++;
                }
                producer.sendOffsetsToTransaction(
                        Collections.singletonMap(new TopicPartition(input, 0), new OffsetAndMetadata(next)),
                        consumer.groupMetadata());
                producer.commitTransaction();
                commits++;
            }
            System.out.println("{\"commits\": " + commits + ", \"records\": " + done + "}");
        } catch (Exception e) {
            String what = (e.getClass().getName() + ": " + e.getMessage()).replace("\\", "/").replace("\"", "'");
            System.out.println("{\"error\": \"" + what.replace("\n", " ") + "\", \"commits\": " + commits + "}");
        }
    }
}
