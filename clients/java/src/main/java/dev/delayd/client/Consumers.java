package dev.delayd.client;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consumers of ready topics, as {@link Work} wants them: byte arrays, offsets committed by the
 * worker once its reports are in Kafka (enable.auto.commit false), a new group reading from the
 * start (auto.offset.reset earliest), and <b>isolation.level read_committed</b>.
 *
 * <p>Why read_committed: kafka-clients' consumer defaults to read_uncommitted, which hands the
 * application every record of a transaction as soon as it is written, including those of
 * transactions that are later aborted: an aborted transaction's records stay in the topic, marked
 * aborted. Once delayd writes its ready records in Kafka transactions (the delivery mode
 * exactly_once), the jobs of a transaction it aborts (a crash, a fenced instance) are delivered
 * again in a later one: a read_uncommitted consumer would see both, a duplicate; a read_committed
 * one sees only the committed delivery. Records written without a transaction are read the same
 * either way, so read_committed costs nothing before then.
 */
public final class Consumers {
    private Consumers() {}

    /** The consumer settings for group groupId on the brokers in bootstrap. */
    public static Map<String, Object> config(String bootstrap, String groupId) {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        return withDefaults(config);
    }

    /**
     * config with delayd's defaults added where it names none: the deserializers, enable.auto.commit
     * false, auto.offset.reset earliest, isolation.level read_committed. A setting config names
     * is kept, read_uncommitted too.
     */
    public static Map<String, Object> withDefaults(Map<String, Object> config) {
        Map<String, Object> out = new HashMap<>(config);
        out.putIfAbsent(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        out.putIfAbsent(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        out.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        out.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        out.putIfAbsent(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        return out;
    }

    /** A consumer of group groupId with {@link #config}'s settings; subscribe it to the ready topics. */
    public static KafkaConsumer<byte[], byte[]> create(String bootstrap, String groupId) {
        return new KafkaConsumer<>(config(bootstrap, groupId));
    }

    /** A consumer with config's settings and {@link #withDefaults}'s where config names none. */
    public static KafkaConsumer<byte[], byte[]> create(Map<String, Object> config) {
        return new KafkaConsumer<>(withDefaults(config));
    }
}
