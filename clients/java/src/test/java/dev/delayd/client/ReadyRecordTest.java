package dev.delayd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.junit.jupiter.api.Test;

/** Reading a ready record's delayd headers, and the deduplication of deliveries read twice. */
class ReadyRecordTest {
    /** A ready record as delayd writes it: the producer's headers, then delayd's own. */
    static ConsumerRecord<byte[], byte[]> ready(String jobId, String attempt, String deliverAt, String repeat) {
        ConsumerRecord<byte[], byte[]> r = new ConsumerRecord<>("ready.orders", 0, 7, jobId.getBytes(), "v".getBytes());
        r.headers().add(new RecordHeader("trace-id", "t-1".getBytes()));
        r.headers().add(new RecordHeader("business", "orders".getBytes()));
        r.headers().add(new RecordHeader("job-id", jobId.getBytes()));
        r.headers().add(new RecordHeader("deliver-at", deliverAt.getBytes()));
        r.headers().add(new RecordHeader("attempt", attempt.getBytes()));
        if (repeat != null) {
            r.headers().add(new RecordHeader("repeat", repeat.getBytes()));
        }
        return r;
    }

    @Test
    void theDelaydHeaders() {
        ReadyRecord r = ReadyRecord.of(ready("order-42", "2", "1795000060000", null));
        assertEquals("order-42", r.jobId());
        assertEquals(2, r.attempt());
        assertEquals(Instant.parse("2026-11-18T11:07:40Z"), r.deliverAt());
        assertEquals("orders", r.business());
        assertEquals(0, r.repeat());
        assertEquals("t-1", r.header("trace-id"));
        assertEquals(5, r.headers().size());
        assertEquals(3, ReadyRecord.of(ready("digest", "1", "1795000060000", "3")).repeat());
    }

    @Test
    void recordsOfOthers() {
        ConsumerRecord<byte[], byte[]> plain = new ConsumerRecord<>("ready.orders", 0, 1, null, "v".getBytes());
        assertFalse(ReadyRecord.isReady(plain));
        assertThrows(IllegalArgumentException.class, () -> ReadyRecord.of(plain));
        // The first header of a name counts; a malformed number reads as absent.
        ReadyRecord odd = ReadyRecord.of(List.of(Header.of("job-id", "j"), Header.of("attempt", "x"),
                Header.of("deliver-at", "tomorrow"), Header.of("job-id", "k")));
        assertEquals("j", odd.jobId());
        assertEquals(0, odd.attempt());
        assertNull(odd.deliverAt());
        assertNull(odd.business());
    }

    @Test
    void dedupDropsADeliveryReadTwiceOnly() {
        Dedup dedup = new Dedup();
        ConsumerRecord<byte[], byte[]> first = ready("order-42", "1", "1795000060000", null);
        assertFalse(dedup.seen(first));
        dedup.remember(first);
        assertTrue(dedup.seen(ready("order-42", "1", "1795000060000", null))); // the same record read again
        assertFalse(dedup.seen(ready("order-42", "2", "1795000060000", null))); // a retry or a redelivery
        assertFalse(dedup.seen(ready("order-43", "1", "1795000060000", null)));
        // A repeating job's occurrences each start at attempt 1.
        dedup.remember(ready("digest", "1", "1795000060000", "1"));
        assertFalse(dedup.seen(ready("digest", "1", "1795086460000", "2")));
        assertEquals(2, dedup.size());
        assertNotEquals(ReadyRecord.of(first).deliveryKey(),
                ReadyRecord.of(ready("order-42", "1", "1795000070000", null)).deliveryKey()); // the id used again
    }

    @Test
    void dedupForgetsTheLeastRecentlySeen() {
        Dedup dedup = new Dedup(2);
        dedup.remember(ready("a", "1", "1", null));
        dedup.remember(ready("b", "1", "1", null));
        assertTrue(dedup.seen(ready("a", "1", "1", null))); // a is now the most recent
        dedup.remember(ready("c", "1", "1", null));
        assertTrue(dedup.seen(ready("a", "1", "1", null)));
        assertFalse(dedup.seen(ready("b", "1", "1", null)));
        assertEquals(2, dedup.size());
        assertThrows(IllegalArgumentException.class, () -> new Dedup(0));
    }
}
