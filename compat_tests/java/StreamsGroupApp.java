import java.time.Duration;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.state.Stores;

/**
 * A stateful Kafka Streams app on the streams rebalance protocol (KIP-1071, group.protocol=streams):
 * StreamsGroupApp BOOTSTRAP APP_ID LINES LABELS OUTPUT STATE_DIR [STANDBYS [REPLICATION_FACTOR]].
 * Lines of LINES are split into words, regrouped by word (the repartition topic APP_ID-words-repartition),
 * counted in an in-memory store (its changelog APP_ID-counts-changelog restores it), and every count
 * update is joined with the word's label from the KTable LABELS (copartitioned with the repartition
 * topic) and written to OUTPUT as "label:count". exactly_once_v2 and no record cache, so each word's
 * committed updates are exactly its running counts 1, 2, 3..., even when tasks move.
 * Prints one JSON line per state change and per uncaught error; runs until stdin closes.
 */
public class StreamsGroupApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String lines = args[2];
        String labels = args[3];
        String output = args[4];
        String stateDir = args[5];
        int standbys = args.length > 6 ? Integer.parseInt(args[6]) : 0;
        int replicationFactor = args.length > 7 ? Integer.parseInt(args[7]) : 1; // internal topics

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replicationFactor);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, standbys);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);

        StreamsBuilder builder = new StreamsBuilder();
        KTable<String, String> labelTable = builder.table(labels, Consumed.with(Serdes.String(), Serdes.String()),
                Materialized.<String, String>as(Stores.inMemoryKeyValueStore("labels"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.String()));
        builder.stream(lines, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .selectKey((key, word) -> word)
                .repartition(Repartitioned.with(Serdes.String(), Serdes.String()).withName("words"))
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .join(labelTable, (count, label) -> label + ":" + count)
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) ->
                System.out.println("{\"state\": \"" + now + "\", \"from\": \"" + before + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            String what = (e.getClass().getName() + ": " + e.getMessage()).replace("\\", "/").replace("\"", "'");
            System.out.println("{\"error\": \"" + what.replace("\n", " ") + "\"}");
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        CountDownLatch stdinClosed = new CountDownLatch(1);
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // Nothing is read from stdin; its end is the signal to stop.
                }
            } catch (java.io.IOException ignored) {
                // A broken stdin means the same as a closed one.
            }
            stdinClosed.countDown();
        });
        watcher.setDaemon(true);
        watcher.start();
        streams.start();
        stdinClosed.await();
        streams.close(Duration.ofSeconds(20));
        System.out.println("{\"closed\": true}");
    }
}
