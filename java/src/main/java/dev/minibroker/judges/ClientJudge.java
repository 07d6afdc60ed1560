package dev.minibroker.judges;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java client as a judge of a broker: each mode does what an application does
 * and prints one JSON object of what it saw on its last stdout line; the Python test
 * asserts on it (tests/judges/test_java_client.py).
 *
 * <ul>
 *   <li>{@code produce BOOTSTRAP TOPIC RECORDS}: per compression codec, an idempotent
 *       KafkaProducer (Kafka 3's default) with acks=all sends keyed records with headers;
 *       a KafkaConsumer reads the partition back. Reports per codec what was acknowledged
 *       and whether every record came back once, in order, byte for byte.
 *   <li>{@code group BOOTSTRAP TOPIC GROUP ASSIGNOR RECORDS}: three KafkaConsumers in one
 *       group (the assignor by its Kafka name) share the topic's partitions while records
 *       arrive; reports each member's assignments, how often they changed, and how often
 *       each record was consumed.
 * </ul>
 *
 * <p>Every report also says which Fetch versions the consumers sent ({@code fetch_versions}):
 * v13+ name topics by their ids (KIP-516).</p>
 */
public final class ClientJudge {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final Duration POLL = Duration.ofMillis(200);
    static final long DEADLINE_MS = 90_000;
    static final Map<String, String> ASSIGNORS = Map.of(
            "range", "org.apache.kafka.clients.consumer.RangeAssignor",
            "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
            "cooperative-sticky", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
    static final List<String> ERRORS = Collections.synchronizedList(new ArrayList<>());

    public static void main(String[] args) throws Exception {
        SentVersions fetches = SentVersions.watch("FETCH");
        ObjectNode report;
        switch (args[0]) {
            case "produce":
                report = produce(args[1], args[2], Integer.parseInt(args[3]));
                break;
            case "group":
                report = group(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]));
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        ArrayNode fetchVersions = report.putArray("fetch_versions");
        fetches.versions().forEach(fetchVersions::add);
        System.out.println(JSON.writeValueAsString(report));
        System.exit(0);
    }

    static Properties producerProps(String bootstrap) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        return props;
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return props;
    }

    static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] data) {
        return data == null ? null : new String(data, StandardCharsets.UTF_8);
    }

    // -- produce ------------------------------------------------------------------------

    static ObjectNode produce(String bootstrap, String topic, int records) throws Exception {
        ObjectNode report = JSON.createObjectNode();
        ObjectNode codecs = report.putObject("codecs");
        for (int c = 0; c < CODECS.length; c++) {
            String codec = CODECS[c];
            int partition = c; // one partition per codec: offsets are the codec's own
            Properties props = producerProps(bootstrap);
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
                for (int i = 0; i < records; i++) {
                    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                            topic, partition, bytes("key-" + i), bytes(codec + "-value-" + i));
                    record.headers().add("n", bytes(Integer.toString(i)));
                    sent.add(producer.send(record));
                }
                producer.flush();
            }
            List<Long> offsets = new ArrayList<>();
            for (Future<RecordMetadata> future : sent) {
                offsets.add(future.get(30, TimeUnit.SECONDS).offset());
            }
            ObjectNode result = codecs.putObject(codec);
            result.put("acknowledged", offsets.size());
            result.put("first_offset", offsets.get(0));
            result.put("last_offset", offsets.get(offsets.size() - 1));
            result.put("read_back_intact", readBack(bootstrap, topic, partition, codec, records));
        }
        return report;
    }

    /** Whether the partition holds exactly the records sent, in order, with their header. */
    static boolean readBack(String bootstrap, String topic, int partition, String codec, int records) {
        try (KafkaConsumer<byte[], byte[]> consumer =
                new KafkaConsumer<>(consumerProps(bootstrap, null))) {
            TopicPartition tp = new TopicPartition(topic, partition);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            List<ConsumerRecord<byte[], byte[]>> found = new ArrayList<>();
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (found.size() < records && System.currentTimeMillis() < deadline) {
                consumer.poll(POLL).forEach(found::add);
            }
            if (found.size() != records) {
                return false;
            }
            for (int i = 0; i < records; i++) {
                ConsumerRecord<byte[], byte[]> r = found.get(i);
                Header header = r.headers().lastHeader("n");
                if (r.offset() != i
                        || !("key-" + i).equals(text(r.key()))
                        || !(codec + "-value-" + i).equals(text(r.value()))
                        || header == null
                        || !Integer.toString(i).equals(text(header.value()))) {
                    return false;
                }
            }
            return true;
        }
    }

    // -- group --------------------------------------------------------------------------

    static ObjectNode group(String bootstrap, String topic, String group, String assignor, int records)
            throws Exception {
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        Map<Integer, List<String>> assignments = new ConcurrentHashMap<>();
        Map<Integer, AtomicInteger> revoked = new ConcurrentHashMap<>();
        Map<Integer, String> finals = new ConcurrentHashMap<>();
        Map<Integer, Set<Integer>> ownedBy = new ConcurrentHashMap<>();
        CountDownLatch done = new CountDownLatch(1);
        List<Thread> members = new ArrayList<>();
        for (int m = 0; m < 3; m++) {
            int member = m;
            assignments.put(member, Collections.synchronizedList(new ArrayList<>()));
            ownedBy.put(member, Collections.synchronizedSet(new TreeSet<>()));
            revoked.put(member, new AtomicInteger());
            Thread thread = new Thread(() -> {
                try {
                    consumeAsMember(bootstrap, topic, group, assignor, member, seen, assignments,
                            revoked, finals, ownedBy.get(member), done);
                } catch (RuntimeException exc) {
                    ERRORS.add("member " + member + ": " + exc);
                    done.countDown();
                }
            });
            members.add(thread);
            thread.start();
            Thread.sleep(2500); // members join one after another: rebalances happen
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(bootstrap))) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, bytes("k" + i), bytes(group + "-" + i)));
            }
            producer.flush();
        }
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        // Every record consumed, and the group settled: each partition owned exactly once.
        while (System.currentTimeMillis() < deadline && done.getCount() > 0) {
            List<Integer> owned = new ArrayList<>();
            ownedBy.values().forEach(set -> {
                synchronized (set) {
                    owned.addAll(set);
                }
            });
            Collections.sort(owned);
            boolean settled = owned.size() == partitionCount(bootstrap, topic)
                    && new TreeSet<>(owned).size() == owned.size();
            if (seen.size() >= records && settled) {
                break;
            }
            Thread.sleep(100);
        }
        done.countDown();
        for (Thread thread : members) {
            thread.join(30_000);
        }
        ObjectNode report = JSON.createObjectNode();
        ArrayNode errors = report.putArray("errors");
        ERRORS.forEach(errors::add);
        report.put("distinct_consumed", seen.size());
        report.put("consumed_more_than_once",
                seen.values().stream().filter(n -> n.get() > 1).count());
        ArrayNode memberReports = report.putArray("members");
        for (int m = 0; m < 3; m++) {
            ObjectNode member = memberReports.addObject();
            ArrayNode history = member.putArray("assignments");
            assignments.get(m).forEach(history::add);
            member.put("partitions_revoked", revoked.get(m).get());
            member.put("final", finals.getOrDefault(m, "[]"));
        }
        return report;
    }

    static final Map<String, Integer> PARTITIONS = new ConcurrentHashMap<>();

    static int partitionCount(String bootstrap, String topic) {
        return PARTITIONS.computeIfAbsent(topic, t -> {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap, null))) {
                return c.partitionsFor(t).size();
            }
        });
    }

    static void consumeAsMember(
            String bootstrap,
            String topic,
            String group,
            String assignor,
            int member,
            Map<String, AtomicInteger> seen,
            Map<Integer, List<String>> assignments,
            Map<Integer, AtomicInteger> revoked,
            Map<Integer, String> finals,
            Set<Integer> owned,
            CountDownLatch done) {
        Properties props = consumerProps(bootstrap, group);
        props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, ASSIGNORS.get(assignor));
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "member-" + member);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    revoked.get(member).addAndGet(partitions.size());
                    partitions.forEach(tp -> owned.remove(tp.partition()));
                    try {
                        consumer.commitSync();
                    } catch (org.apache.kafka.common.KafkaException rebalancing) {
                        // committed after every poll already; nothing is lost
                    }
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    partitions.forEach(tp -> owned.add(tp.partition()));
                    synchronized (owned) {
                        assignments.get(member).add(owned.toString());
                    }
                }
            });
            while (done.getCount() > 0) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    String value = text(record.value());
                    if (value.startsWith(group + "-")) { // this run's records only
                        seen.computeIfAbsent(value, v -> new AtomicInteger()).incrementAndGet();
                    }
                }
                try {
                    consumer.commitSync();
                } catch (org.apache.kafka.common.errors.RebalanceInProgressException again) {
                    // a cooperative rebalance is under way: the next poll completes it
                }
            }
            synchronized (owned) {
                finals.put(member, owned.toString()); // before close revokes everything
            }
        }
    }
}
