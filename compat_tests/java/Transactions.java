import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactions against a broker: Transactions BOOTSTRAP TOPIC.
 * Commits "c0".."c4", aborts "a0".."a4", commits "d0".."d4"; then one producer fences another with
 * the same transactional.id. Between them, a transaction of offsets only (sendOffsetsToTransaction
 * for group "jtx-group"), and the producer epoch DescribeTransactions then reports: it tells
 * whether the client used transactions v2 (an epoch bump on every EndTxn) or v1.
 * Prints one JSON line per step for the test to check.
 */
public class Transactions {
    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("transaction.timeout.ms", "30000");
        return new KafkaProducer<>(p);
    }

    static List<String> read(String bootstrap, String topic, String isolation, int expected) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("isolation.level", isolation);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(Collections.singletonList(tp));
            c.seekToBeginning(Collections.singletonList(tp));
            long deadline = System.currentTimeMillis() + 20000;
            // Read to the end the consumer can see (the LSO under read_committed), then a little more.
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r.value());
                }
                long end = c.endOffsets(Collections.singletonList(tp)).get(tp);
                if (out.size() >= expected && c.position(tp) >= end) {
                    break;
                }
            }
        }
        return out;
    }

    static String json(List<String> values) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            b.append(i == 0 ? "" : ",").append('"').append(values.get(i)).append('"');
        }
        return b.append(']').toString();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        try (KafkaProducer<String, String> p = producer(bootstrap, "java-txn")) {
            p.initTransactions();
            for (String prefix : new String[] {"c", "a", "d"}) {
                p.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    p.send(new ProducerRecord<>(topic, 0, "k", prefix + i));
                }
                if (prefix.equals("a")) {
                    p.flush();
                    p.abortTransaction();
                } else {
                    p.commitTransaction();
                }
            }
            p.beginTransaction();
            p.sendOffsetsToTransaction(
                Collections.singletonMap(new TopicPartition(topic, 0), new OffsetAndMetadata(7)),
                new ConsumerGroupMetadata("jtx-group"));
            p.commitTransaction();
        }
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            int epoch = admin.describeTransactions(Collections.singletonList("java-txn"))
                .description("java-txn").get().producerEpoch();
            long offset = admin.listConsumerGroupOffsets("jtx-group").partitionsToOffsetAndMetadata().get()
                .get(new TopicPartition(topic, 0)).offset();
            System.out.println("{\"epoch\": " + epoch + ", \"group_offset\": " + offset + "}");
        }
        System.out.println("{\"committed\": " + json(read(bootstrap, topic, "read_committed", 10)) + "}");
        System.out.println("{\"uncommitted\": " + json(read(bootstrap, topic, "read_uncommitted", 15)) + "}");

        KafkaProducer<String, String> first = producer(bootstrap, "java-fence");
        first.initTransactions();
        first.beginTransaction();
        first.send(new ProducerRecord<>(topic, 0, "k", "zombie")).get();
        try (KafkaProducer<String, String> second = producer(bootstrap, "java-fence")) {
            second.initTransactions(); // fences `first`, aborting its transaction
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, 0, "k", "second"));
            second.commitTransaction();
        }
        String outcome;
        try {
            first.commitTransaction();
            outcome = "committed";
        } catch (Exception e) {
            outcome = e.getClass().getSimpleName();
        }
        first.close(Duration.ofSeconds(5));
        System.out.println("{\"fenced\": \"" + outcome + "\"}");
        System.out.println("{\"after_fence\": " + json(read(bootstrap, topic, "read_committed", 11)) + "}");
    }
}
