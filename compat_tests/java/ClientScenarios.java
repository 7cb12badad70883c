// The Java client's side of the client compatibility tests (run by test_clients_java.py), built
// against kafka-clients 3.9 (Spark 4's line) and 4.x. One command per call:
//
//     java -cp '.deps/kafka/*' compat_tests/java/ClientScenarios.java produce '{"bootstrap":"127.0.0.1:9092",...}'
//     java -cp '.deps/kafka/*' compat_tests/java/ClientScenarios.java repl
//
// `repl` reads one command per stdin line, {"id":1,"cmd":"produce","args":{...}}, and answers each
// with one JSON line on stdout, {"id":1,"ok":{...}} or {"id":1,"error":{"type":...,"message":...}}:
// the tests pay for one JVM start per jar set instead of one per step, and a named producer
// ("producer":"p1" with "keep":true) lives on between commands, e.g. across a broker restart.
// Bytes travel as hex (null stays null) so that keys, values and headers compare byte-exact.
// Commands and their arguments are listed in run() below; client configs go in "config".

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ClientScenarios {
    static final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();

    public static void main(String[] argv) throws Exception {
        if (argv.length == 2) {
            System.out.println(Json.write(answer(null, argv[0], asMap(Json.parse(argv[1])))));
        } else if (argv.length == 1 && argv[0].equals("repl")) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isBlank()) continue;
                Map<String, Object> req = asMap(Json.parse(line));
                System.out.println(Json.write(answer(req.get("id"), (String) req.get("cmd"), asMap(req.get("args")))));
                System.out.flush();
            }
        } else {
            System.err.println("usage: ClientScenarios COMMAND JSON-ARGS | ClientScenarios repl");
            System.exit(2);
        }
        for (KafkaProducer<byte[], byte[]> p : producers.values()) p.close(Duration.ofSeconds(5));
        System.exit(0);  // the clients' threads are daemons, but do not wait on anything
    }

    static Map<String, Object> answer(Object id, String cmd, Map<String, Object> args) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("id", id);
        try {
            out.put("ok", run(cmd, args));
        } catch (Throwable e) {
            out.put("error", error(e));
        }
        return out;
    }

    static Object run(String cmd, Map<String, Object> a) throws Exception {
        switch (cmd) {
            case "produce": return produce(a);
            case "close_producer": {
                KafkaProducer<byte[], byte[]> p = producers.remove((String) a.get("producer"));
                if (p != null) p.close(Duration.ofSeconds(10));
                return Map.of();
            }
            case "consume": return consume(a);
            case "consume_partitions": return consumePartitions(a);
            case "offsets": return offsets(a);
            case "create_topic": {
                try (Admin admin = admin(a)) {
                    NewTopic t = new NewTopic(str(a, "topic"), num(a, "partitions"), (short) 1);
                    t.configs(strMap(a.get("configs")));
                    admin.createTopics(List.of(t)).all().get();
                    return Map.of();
                }
            }
            case "create_partitions": {
                try (Admin admin = admin(a)) {
                    admin.createPartitions(Map.of(str(a, "topic"), NewPartitions.increaseTo(num(a, "total")))).all().get();
                    return Map.of();
                }
            }
            case "describe_topic": {
                try (Admin admin = admin(a)) {
                    TopicDescription d = admin.describeTopics(List.of(str(a, "topic"))).allTopicNames().get().get(str(a, "topic"));
                    List<Object> parts = new ArrayList<>();
                    for (var p : d.partitions()) {
                        parts.add(Map.of("partition", p.partition(), "leader", p.leader() == null ? -1 : p.leader().id(),
                                "replicas", p.replicas().size()));
                    }
                    return Map.of("name", d.name(), "internal", d.isInternal(), "partitions", parts);
                }
            }
            case "list_topics": {
                try (Admin admin = admin(a)) {
                    return Map.of("topics", new TreeSet<>(admin.listTopics().names().get()));
                }
            }
            case "delete_topic": {
                try (Admin admin = admin(a)) {
                    admin.deleteTopics(List.of(str(a, "topic"))).all().get();
                    return Map.of();
                }
            }
            case "alter_configs": {
                try (Admin admin = admin(a)) {
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (Object o : (List<?>) a.get("ops")) {
                        List<?> op = (List<?>) o;  // [operation, name, value]
                        ops.add(new AlterConfigOp(new ConfigEntry((String) op.get(1), (String) op.get(2)),
                                AlterConfigOp.OpType.valueOf((String) op.get(0))));
                    }
                    ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, str(a, "topic"));
                    admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
                    return Map.of();
                }
            }
            case "describe_configs": {
                try (Admin admin = admin(a)) {
                    ConfigResource r = new ConfigResource(ConfigResource.Type.valueOf(str(a, "type")), str(a, "name"));
                    Config cfg = admin.describeConfigs(List.of(r)).all().get().get(r);
                    Map<String, Object> out = new TreeMap<>();
                    for (ConfigEntry e : cfg.entries()) {
                        Map<String, Object> entry = new LinkedHashMap<>();
                        entry.put("value", e.value());
                        entry.put("default", e.isDefault());
                        entry.put("source", e.source().name());
                        entry.put("read_only", e.isReadOnly());
                        out.put(e.name(), entry);
                    }
                    return out;
                }
            }
            case "delete_records": {
                try (Admin admin = admin(a)) {
                    TopicPartition tp = new TopicPartition(str(a, "topic"), num(a, "partition"));
                    DeletedRecords d = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(lng(a, "before"))))
                            .lowWatermarks().get(tp).get();
                    return Map.of("low_watermark", d.lowWatermark());
                }
            }
            case "partitions_for": {
                try (KafkaConsumer<byte[], byte[]> c = consumer(a)) {
                    List<PartitionInfo> found = c.partitionsFor(str(a, "topic"), Duration.ofMillis(lng(a, "timeout_ms")));
                    List<Object> parts = new ArrayList<>();
                    for (PartitionInfo p : found == null ? List.<PartitionInfo>of() : found) parts.add(p.partition());
                    return Map.of("partitions", parts);
                }
            }
            default: throw new IllegalArgumentException("unknown command " + cmd);
        }
    }

    // {"topic","partition","records":[{"key","value","headers":[[k,v]],"timestamp"}],"config",
    //  "producer":name,"keep":bool,"each":bool}: "each" flushes after every record (one batch each).
    static Object produce(Map<String, Object> a) throws Exception {
        String name = (String) a.getOrDefault("producer", "");
        KafkaProducer<byte[], byte[]> p = producers.get(name);
        if (p == null) {
            Properties props = props(a);
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            p = new KafkaProducer<>(props);
        }
        boolean each = Boolean.TRUE.equals(a.get("each"));
        Integer partition = a.get("partition") == null ? null : num(a, "partition");
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<Object> results = new ArrayList<>();
        for (Object o : (List<?>) a.get("records")) {
            Map<String, Object> r = asMap(o);
            List<Header> headers = new ArrayList<>();
            for (Object h : (List<?>) r.getOrDefault("headers", List.of())) {
                List<?> kv = (List<?>) h;
                headers.add(new RecordHeader((String) kv.get(0), hex((String) kv.get(1))));
            }
            Long ts = r.get("timestamp") == null ? null : ((Number) r.get("timestamp")).longValue();
            ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(str(a, "topic"), partition, ts,
                    hex((String) r.get("key")), hex((String) r.get("value")), headers);
            try {
                futures.add(p.send(rec));
            } catch (Exception e) {  // send() throws only for errors it cannot put in the future
                futures.add(null);
                results.add(Map.of("error", error(e)));
            }
            if (each) p.flush();
        }
        p.flush();
        List<Object> ordered = new ArrayList<>();
        int thrown = 0;
        for (Future<RecordMetadata> f : futures) {
            if (f == null) {
                ordered.add(results.get(thrown++));
                continue;
            }
            try {
                RecordMetadata m = f.get();
                ordered.add(Map.of("partition", m.partition(), "offset", m.offset(), "timestamp", m.timestamp()));
            } catch (ExecutionException e) {
                ordered.add(Map.of("error", error(e)));
            }
        }
        if (Boolean.TRUE.equals(a.get("keep"))) producers.put(name, p);
        else p.close(Duration.ofSeconds(10));
        return Map.of("results", ordered);
    }

    // {"topic","partition","from":"earliest"|"latest"|offset|{"timestamp":ms},"max","timeout_ms","config"}
    static Object consume(Map<String, Object> a) throws Exception {
        TopicPartition tp = new TopicPartition(str(a, "topic"), num(a, "partition"));
        try (KafkaConsumer<byte[], byte[]> c = consumer(a)) {
            c.assign(List.of(tp));
            Object from = a.get("from");
            if ("earliest".equals(from)) c.seekToBeginning(List.of(tp));
            else if ("latest".equals(from)) c.seekToEnd(List.of(tp));
            else if (from instanceof Number) c.seek(tp, ((Number) from).longValue());
            else {
                long ts = lng(asMap(from), "timestamp");
                OffsetAndTimestamp found = c.offsetsForTimes(Map.of(tp, ts)).get(tp);
                if (found == null) c.seekToEnd(List.of(tp));
                else c.seek(tp, found.offset());
            }
            long start = c.position(tp);
            int max = num(a, "max");
            long deadline = System.currentTimeMillis() + lng(a, "timeout_ms");
            List<Object> got = new ArrayList<>();
            while (got.size() < max && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    List<Object> headers = new ArrayList<>();
                    for (Header h : r.headers()) headers.add(Arrays.asList(h.key(), hex(h.value())));
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("offset", r.offset());
                    m.put("key", hex(r.key()));
                    m.put("value", hex(r.value()));
                    m.put("headers", headers);
                    m.put("timestamp", r.timestamp());
                    m.put("timestamp_type", r.timestampType().name());
                    got.add(m);
                }
            }
            return Map.of("start", start, "records", got);
        }
    }

    // {"topic","partitions":[p...],"max","timeout_ms","linger_ms","config"}: read the partitions from
    // their beginning until "max" records (or the timeout), then keep polling for "linger_ms".
    static Object consumePartitions(Map<String, Object> a) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (Object p : (List<?>) a.get("partitions")) tps.add(new TopicPartition(str(a, "topic"), ((Number) p).intValue()));
        try (KafkaConsumer<byte[], byte[]> c = consumer(a)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            int max = num(a, "max");
            long deadline = System.currentTimeMillis() + lng(a, "timeout_ms");
            long lingerUntil = Long.MAX_VALUE;
            List<Object> got = new ArrayList<>();
            while (System.currentTimeMillis() < Math.min(deadline, lingerUntil)) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    got.add(Arrays.asList(r.partition(), r.offset(), hex(r.value())));
                }
                if (got.size() >= max && lingerUntil == Long.MAX_VALUE) {
                    lingerUntil = System.currentTimeMillis() + lng(a, "linger_ms");
                }
            }
            return Map.of("records", got);
        }
    }

    // {"topic","partition","timestamps":[ms...]}: beginning and end offsets, and offsetsForTimes.
    static Object offsets(Map<String, Object> a) throws Exception {
        TopicPartition tp = new TopicPartition(str(a, "topic"), num(a, "partition"));
        try (KafkaConsumer<byte[], byte[]> c = consumer(a)) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("beginning", c.beginningOffsets(List.of(tp)).get(tp));
            out.put("end", c.endOffsets(List.of(tp)).get(tp));
            List<Object> found = new ArrayList<>();
            for (Object t : (List<?>) a.getOrDefault("timestamps", List.of())) {
                OffsetAndTimestamp o = c.offsetsForTimes(Map.of(tp, ((Number) t).longValue())).get(tp);
                found.add(o == null ? null : Arrays.asList(o.offset(), o.timestamp()));
            }
            out.put("for_times", found);
            return out;
        }
    }

    static Admin admin(Map<String, Object> a) {
        return Admin.create(props(a));
    }

    static KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> a) {
        Properties props = props(a);
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        props.putIfAbsent("enable.auto.commit", "false");
        return new KafkaConsumer<>(props);
    }

    static Properties props(Map<String, Object> a) {
        Properties props = new Properties();
        props.put("bootstrap.servers", str(a, "bootstrap"));
        props.putAll(strMap(a.get("config")));
        return props;
    }

    static Map<String, Object> error(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof org.apache.kafka.common.KafkaException
                && e.getClass() == org.apache.kafka.common.KafkaException.class) && e.getCause() != null) {
            e = e.getCause();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("type", e.getClass().getSimpleName());
        out.put("message", String.valueOf(e.getMessage()));
        return out;
    }

    // --- small helpers: arguments, hex, and a JSON reader/writer (the JDK has none) ---

    @SuppressWarnings("unchecked")
    static Map<String, Object> asMap(Object o) {
        return o == null ? new HashMap<>() : (Map<String, Object>) o;
    }

    static String str(Map<String, Object> a, String k) {
        Object v = a.get(k);
        if (v == null) throw new IllegalArgumentException("missing argument " + k);
        return v.toString();
    }

    static int num(Map<String, Object> a, String k) {
        return (int) lng(a, k);
    }

    static long lng(Map<String, Object> a, String k) {
        Object v = a.get(k);
        if (!(v instanceof Number)) throw new IllegalArgumentException("missing number " + k);
        return ((Number) v).longValue();
    }

    static Map<String, String> strMap(Object o) {
        Map<String, String> out = new HashMap<>();
        asMap(o).forEach((k, v) -> out.put(k, String.valueOf(v)));
        return out;
    }

    static byte[] hex(String s) {
        if (s == null) return null;
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    static String hex(byte[] b) {
        if (b == null) return null;
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        static Object parse(String s) {
            Json j = new Json(s);
            Object v = j.value();
            j.ws();
            if (j.i != s.length()) throw new IllegalArgumentException("trailing JSON at " + j.i);
            return v;
        }

        private void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        private Object value() {
            ws();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> m = new LinkedHashMap<>();
                i++;
                ws();
                if (s.charAt(i) == '}') { i++; return m; }
                while (true) {
                    ws();
                    String k = string();
                    ws();
                    expect(':');
                    m.put(k, value());
                    ws();
                    if (s.charAt(i++) == '}') return m;
                }
            }
            if (c == '[') {
                List<Object> l = new ArrayList<>();
                i++;
                ws();
                if (s.charAt(i) == ']') { i++; return l; }
                while (true) {
                    l.add(value());
                    ws();
                    if (s.charAt(i++) == ']') return l;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("null", i)) { i += 4; return null; }
            if (s.startsWith("true", i)) { i += 4; return true; }
            if (s.startsWith("false", i)) { i += 5; return false; }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String n = s.substring(start, i);
            if (n.isEmpty()) throw new IllegalArgumentException("bad JSON at " + start);
            return n.matches("-?\\d+") ? (Object) Long.parseLong(n) : (Object) Double.parseDouble(n);
        }

        private void expect(char c) {
            if (s.charAt(i++) != c) throw new IllegalArgumentException("expected " + c + " at " + (i - 1));
        }

        private String string() {
            expect('"');
            StringBuilder sb = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return sb.toString();
                if (c != '\\') { sb.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': sb.append('\n'); break;
                    case 't': sb.append('\t'); break;
                    case 'r': sb.append('\r'); break;
                    case 'b': sb.append('\b'); break;
                    case 'f': sb.append('\f'); break;
                    case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: sb.append(e);
                }
            }
        }

        static String write(Object v) {
            StringBuilder sb = new StringBuilder();
            write(sb, v);
            return sb.toString();
        }

        private static void write(StringBuilder sb, Object v) {
            if (v == null) sb.append("null");
            else if (v instanceof String) quote(sb, (String) v);
            else if (v instanceof Number || v instanceof Boolean) sb.append(v);
            else if (v instanceof Map) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    quote(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    write(sb, e.getValue());
                }
                sb.append('}');
            } else if (v instanceof Iterable) {
                sb.append('[');
                boolean first = true;
                for (Object o : (Iterable<?>) v) {
                    if (!first) sb.append(',');
                    first = false;
                    write(sb, o);
                }
                sb.append(']');
            } else quote(sb, v.toString());
        }

        private static void quote(StringBuilder sb, String s) {
            sb.append('"');
            for (char c : s.toCharArray()) {
                if (c == '"' || c == '\\') sb.append('\\').append(c);
                else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                else sb.append(c);
            }
            sb.append('"');
        }
    }
}
