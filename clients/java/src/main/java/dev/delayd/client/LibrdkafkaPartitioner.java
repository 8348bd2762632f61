package dev.delayd.client;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.zip.CRC32;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.PartitionInfo;

/**
 * The partition of a keyed record as librdkafka's default partitioner (consistent_random) picks
 * it: CRC-32 of the key modulo the topic's partition count (a record without a key: any available
 * partition). delayd, delayctl and the Python client produce through librdkafka, and the
 * TypeScript client picks partitions the same way; with this partitioner the same job's records
 * from this client land in the same partition as theirs, so that a cancel or reschedule sent by
 * one of them stays behind the schedule sent by another. (kafka-clients' own default hashes keys
 * with murmur2, which puts a key in another partition.)
 *
 * <p>The {@link Client} sets it (partitioner.class); give it to a producer of your own, or to
 * Spring's (spring.kafka.producer.properties.partitioner.class).
 */
public final class LibrdkafkaPartitioner implements Partitioner {
    /** CRC-32 (IEEE 802.3, as zlib and librdkafka's rd_crc32). */
    public static long crc32(byte[] data) {
        CRC32 crc = new CRC32();
        crc.update(data);
        return crc.getValue();
    }

    /** The partition librdkafka's consistent_random gives key among count partitions. */
    public static int partitionOf(byte[] key, int count) {
        return (int) (crc32(key) % count);
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes,
            Cluster cluster) {
        List<PartitionInfo> all = cluster.partitionsForTopic(topic);
        if (keyBytes != null && keyBytes.length > 0) {
            return partitionOf(keyBytes, all.size());
        }
        List<PartitionInfo> available = cluster.availablePartitionsForTopic(topic);
        List<PartitionInfo> from = available.isEmpty() ? all : available;
        return from.get(ThreadLocalRandom.current().nextInt(from.size())).partition();
    }

    @Override
    public void configure(Map<String, ?> configs) {}

    @Override
    public void close() {}
}
