import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client under injected faults (compat_tests/test_faults_injection.py):
 *   FaultClients produce BOOTSTRAP TOPIC N   an idempotent producer sends v0..v(N-1), one by one;
 *                                            prints {"acked": n, "offsets": [...]} or the error
 *   FaultClients txn BOOTSTRAP TOPIC TXN_ID  one transaction of one record, committed; prints
 *                                            {"committed": true} or {"error": class, "message": ...}
 */
public class FaultClients {
    static Properties props(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("retry.backoff.ms", "50");
        p.put("retry.backoff.max.ms", "200");
        p.put("delivery.timeout.ms", "30000");
        p.put("request.timeout.ms", "10000");
        return p;
    }

    static String quote(String s) {
        return "\"" + String.valueOf(s).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1], topic = args[2];
        if (args[0].equals("produce")) {
            Properties p = props(bootstrap);
            p.put("enable.idempotence", "true");
            p.put("acks", "all");
            int n = Integer.parseInt(args[3]);
            List<Long> offsets = new ArrayList<>();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < n; i++) {
                    Future<RecordMetadata> f = producer.send(new ProducerRecord<>(topic, 0, null, "v" + i));
                    offsets.add(f.get().offset());
                }
                System.out.println("{\"acked\": " + offsets.size() + ", \"offsets\": " + offsets + "}");
            } catch (Exception e) {
                Throwable c = e.getCause() != null ? e.getCause() : e;
                System.out.println("{\"acked\": " + offsets.size() + ", \"error\": " + quote(c.getClass().getName()) + "}");
            }
        } else {
            Properties p = props(bootstrap);
            p.put("transactional.id", args[3]);
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                producer.initTransactions();
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(topic, 0, null, "txn")).get();
                try {
                    producer.commitTransaction();
                    System.out.println("{\"committed\": true}");
                } catch (Exception e) {
                    System.out.println("{\"error\": " + quote(e.getClass().getName()) + ", \"message\": " + quote(e.getMessage()) + "}");
                }
            }
        }
    }
}
