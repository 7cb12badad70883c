// Produces one record (snappy, idempotent) and fetches it back with assign(), so that
// tools/capture_requests.py can record the frames the Java client sends.
//   java -cp '.deps/kafka-clients-3.9/*' tools/java/CaptureClient.java <bootstrap> <topic>
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CaptureClient {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("compression.type", "snappy");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(args[1], 0, "key".getBytes(), "value".repeat(20).getBytes());
            r.headers().add("h", "1".getBytes());
            producer.send(r).get();
        }
        Properties c = new Properties();
        c.put("bootstrap.servers", args[0]);
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(args[1], 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            consumer.poll(Duration.ofSeconds(2));
        }
    }
}
