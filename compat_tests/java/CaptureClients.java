import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client while a traffic capture runs (compat_tests/test_capture.py):
 *   CaptureClients produce BOOTSTRAP TOPIC N CLIENT_ID   keys jk0.., values jv0.. to partition i % 2;
 *                                                       prints [[partition, offset, key, value], ...]
 *   CaptureClients consume BOOTSTRAP TOPIC N CLIENT_ID   reads partitions 0 and 1 from the start
 *                                                       until N records; prints them the same way
 */
public class CaptureClients {
    static String quote(String s) {
        return "\"" + String.valueOf(s).replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String row(int partition, long offset, String key, String value) {
        return "[" + partition + "," + offset + "," + quote(key) + "," + quote(value) + "]";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1], topic = args[2], clientId = args[4];
        int n = Integer.parseInt(args[3]);
        List<String> rows = new ArrayList<>();
        if (args[0].equals("produce")) {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("client.id", clientId);
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            p.put("acks", "all");
            p.put("linger.ms", "5");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                List<Future<RecordMetadata>> sent = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, i % 2, "jk" + i, "jv" + i)));
                }
                for (int i = 0; i < n; i++) {
                    RecordMetadata m = sent.get(i).get();
                    rows.add(row(m.partition(), m.offset(), "jk" + i, "jv" + i));
                }
            }
        } else {
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("client.id", clientId);
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", StringDeserializer.class.getName());
            p.put("enable.auto.commit", "false");
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p)) {
                List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                long deadline = System.currentTimeMillis() + 30000;
                while (rows.size() < n && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        rows.add(row(r.partition(), r.offset(), r.key(), r.value()));
                    }
                }
            }
        }
        System.out.println("[" + String.join(",", rows) + "]");
    }
}
