// The Java client 4.3's newest requests, for tools/capture_requests.py --java-4.3 (through a
// recording proxy in front of a real kcompat broker): an Admin creates the topic, an idempotent
// producer writes one record, a classic-protocol group member and a KIP-848 one subscribe, poll
// and commit.
//   java -cp '.deps/kafka/*' tools/java/CaptureClient43.java <bootstrap> <topic>
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CaptureClient43 {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(a)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("compression.type", "lz4");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(topic, 0, "key".getBytes(), "value".repeat(20).getBytes());
            r.headers().add("h", "1".getBytes());
            producer.send(r).get();
        }
        for (String protocol : List.of("classic", "consumer")) {
            Properties c = new Properties();
            c.put("bootstrap.servers", bootstrap);
            c.put("group.id", "golden-" + protocol);
            c.put("group.protocol", protocol);
            c.put("enable.auto.commit", "false");
            c.put("auto.offset.reset", "earliest");
            if (protocol.equals("classic")) c.put("heartbeat.interval.ms", "200");
            c.put("key.deserializer", ByteArrayDeserializer.class.getName());
            c.put("value.deserializer", ByteArrayDeserializer.class.getName());
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
                consumer.subscribe(List.of(topic));
                int got = 0;
                long deadline = System.currentTimeMillis() + 30_000;
                while (got == 0 && System.currentTimeMillis() < deadline) got += consumer.poll(Duration.ofMillis(500)).count();
                if (got == 0) throw new IllegalStateException(protocol + " consumer read nothing");
                consumer.commitSync();
                consumer.poll(Duration.ofMillis(800)); // a heartbeat or two
            }
        }
    }
}
