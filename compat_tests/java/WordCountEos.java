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
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * A Kafka Streams word count with processing.guarantee=exactly_once_v2:
 * WordCountEos BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR MILLIS_PER_WORD.
 * Lines of INPUT are split into words, regrouped by word (a repartition topic), counted in an
 * in-memory store (its changelog topic restores it) and every count update goes to OUTPUT (no
 * record cache, so each key's committed updates are exactly its running counts 1, 2, 3...).
 * MILLIS_PER_WORD slows processing so that a test can kill the broker mid-stream.
 * Prints one JSON line per state change and per uncaught error; runs until stdin closes.
 */
public class WordCountEos {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
        long millis = Long.parseLong(args[5]);
        int replicationFactor = args.length > 6 ? Integer.parseInt(args[6]) : 1; // internal topics

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replicationFactor);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // A broker that is gone for a few seconds must not cost the group its member.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 30000);
        p.put(StreamsConfig.consumerPrefix("max.poll.records"), 50);
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.split(" ")))
                .selectKey((key, word) -> word)
                .repartition(Repartitioned.with(Serdes.String(), Serdes.String()).withName("words"))
                .peek((word, same) -> {
                    // Slow after the repartition topic, so the output trickles out commit by commit.
                    if (millis > 0) {
                        try {
                            Thread.sleep(millis);  // a sleep, not a spin: the test machine's cores are shared
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }
                })
                .groupByKey()
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String())
                        .withValueSerde(Serdes.Long()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) ->
                System.out.println("{\"state\": \"" + now + "\", \"from\": \"" + before + "\"}"));
        streams.setUncaughtExceptionHandler(e -> {
            String what = (e.getClass().getName() + ": " + e.getMessage()).replace("\\", "/").replace("\"", "'");
            System.out.println("{\"error\": \"" + what.replace("\n", " ") + "\"}");
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
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
