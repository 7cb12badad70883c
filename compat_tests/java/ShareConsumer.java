// A KafkaShareConsumer (Kafka 4.3.1) in explicit acknowledgement mode, for compat_tests/test_share_groups.py:
//   java ShareConsumer <bootstrap> <group> <topic> <seconds>
// prints "<value> <delivery count>" for each record it gets, then acknowledges it by its value:
// "release..." RELEASE, "reject..." REJECT, anything else ACCEPT; commitSync after each poll.
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsumer {
    public static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        long end = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            while (System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                    String v = r.value();
                    System.out.println(v + " " + r.deliveryCount().map(String::valueOf).orElse("-"));
                    AcknowledgeType t = v.startsWith("release") ? AcknowledgeType.RELEASE
                        : v.startsWith("reject") ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
                    consumer.acknowledge(r, t);
                }
                consumer.commitSync();
                System.out.flush();
            }
        }
    }
}
