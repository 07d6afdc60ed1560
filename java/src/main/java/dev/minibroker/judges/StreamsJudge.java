package dev.minibroker.judges;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * Kafka Streams as a judge: {@code StreamsJudge BOOTSTRAP APP_ID INPUT OUTPUT EXPECTED}
 * runs the classic word count - lines split into words, re-keyed by word (a repartition
 * topic), counted in a state store (backed by a compacted changelog topic), the counts
 * streamed to OUTPUT - until the store holds EXPECTED distinct words whose counts sum to
 * the words of the input, then prints one JSON object: the store's counts and the
 * application's state. The Python test reads OUTPUT and the internal topics back itself.
 *
 * <p>Two optional arguments follow: the processing guarantee ({@code at_least_once}, the
 * default, or {@code exactly_once_v2}) and a state directory (a fresh temporary one by
 * default). A restarted application given the same state directory keeps its process id,
 * so under exactly_once_v2 its transactional producer fences the killed one's.</p>
 */
public final class StreamsJudge {
    public static final String STORE = "word-counts";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        long expectedTotal = Long.parseLong(args[4]);
        String guarantee = args.length > 5 ? args[5] : StreamsConfig.AT_LEAST_ONCE;
        Path stateDir = args.length > 6
                ? Files.createDirectories(Path.of(args[6]))
                : Files.createTempDirectory("streams-judge");
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "500");
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "3");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0"); // every update out
        props.put("auto.offset.reset", "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(Materialized.as(STORE))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        ObjectNode report = ClientJudge.JSON.createObjectNode();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props)) {
            streams.start();
            long deadline = System.currentTimeMillis() + 180_000;
            Map<String, Long> counts = new TreeMap<>();
            while (System.currentTimeMillis() < deadline) {
                if (streams.state() == KafkaStreams.State.RUNNING) {
                    counts = snapshot(streams);
                    if (counts.values().stream().mapToLong(Long::longValue).sum() == expectedTotal) {
                        break;
                    }
                } else if (streams.state() == KafkaStreams.State.ERROR) {
                    break;
                }
                Thread.sleep(250);
            }
            report.put("state", streams.state().toString());
            ObjectNode store = report.putObject("store");
            counts.forEach(store::put);
            Thread.sleep(1000); // a last commit: the changelog and output catch up
            streams.close();
        }
        System.out.println(ClientJudge.JSON.writeValueAsString(report));
        System.exit(0);
    }

    static Map<String, Long> snapshot(KafkaStreams streams) {
        Map<String, Long> counts = new TreeMap<>();
        try {
            ReadOnlyKeyValueStore<String, Long> store = streams.store(
                    StoreQueryParameters.fromNameAndType(STORE, QueryableStoreTypes.keyValueStore()));
            try (KeyValueIterator<String, Long> all = store.all()) {
                while (all.hasNext()) {
                    KeyValue<String, Long> entry = all.next();
                    counts.put(entry.key, entry.value);
                }
            }
        } catch (RuntimeException rebalancing) {
            // the store moves during a rebalance: ask again
        }
        return counts;
    }
}
