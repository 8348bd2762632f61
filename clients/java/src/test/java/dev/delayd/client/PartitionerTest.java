package dev.delayd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.junit.jupiter.api.Test;

/**
 * The partitioner picks librdkafka's partition for a key: CRC-32 (the expected values are
 * zlib.crc32's, an implementation of its own) modulo the partition count.
 */
class PartitionerTest {
    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void crc32IsZlibs() {
        assertEquals(0xCBF43926L, LibrdkafkaPartitioner.crc32(utf8("123456789"))); // the check value of CRC-32
        assertEquals(1475806942L, LibrdkafkaPartitioner.crc32(utf8("order-42")));
        assertEquals(1648445226L, LibrdkafkaPartitioner.crc32(utf8("hello-1")));
        assertEquals(2544028307L, LibrdkafkaPartitioner.crc32(utf8("digest-daily")));
        assertEquals(4124837925L, LibrdkafkaPartitioner.crc32(utf8("j\u00e9")));
    }

    @Test
    void partitionOfAKey() {
        assertEquals(1, LibrdkafkaPartitioner.partitionOf(utf8("order-42"), 3));
        assertEquals(10, LibrdkafkaPartitioner.partitionOf(utf8("order-42"), 12));
        assertEquals(11, LibrdkafkaPartitioner.partitionOf(utf8("digest-daily"), 12)); // above 2^31: unsigned
    }

    private static Cluster cluster(String topic, int partitions, int down) {
        Node node = new Node(1, "127.0.0.1", 9092);
        List<PartitionInfo> infos = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            infos.add(new PartitionInfo(topic, p, p == down ? null : node, new Node[] {node}, new Node[] {node}));
        }
        return new Cluster("c", List.of(node), infos, Set.of(), Set.of());
    }

    @Test
    void throughTheProducersInterface() {
        try (LibrdkafkaPartitioner p = new LibrdkafkaPartitioner()) {
            Cluster c = cluster("t", 12, -1);
            assertEquals(10, p.partition("t", "order-42", utf8("order-42"), null, null, c));
            // Without a key: any partition with a leader, never one without.
            Cluster down = cluster("t", 3, 1);
            Set<Integer> seen = new HashSet<>();
            for (int i = 0; i < 200; i++) {
                seen.add(p.partition("t", null, null, null, null, down));
            }
            assertEquals(Set.of(0, 2), seen);
            assertTrue(p.partition("t", "", new byte[0], null, null, down) != 1);
        }
    }
}
