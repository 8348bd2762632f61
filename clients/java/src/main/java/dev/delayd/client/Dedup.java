package dev.delayd.client;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * Remembers the deliveries a consumer has done, so that an at-least-once consumer does not do one
 * twice when it reads its record again: after a rebalance or a restart before its offset was
 * committed, or when a failed commit or an error handler makes it poll the record again. A
 * delivery is named by {@link ReadyRecord#deliveryKey} (job-id, occurrence, attempt). A record
 * with a higher attempt is not a duplicate to drop but a new delivery that delayd waits for a
 * report on: a retry after a failed report, a redelivery after an ack timeout, or delayd's own
 * duplicate after a crash (docs/guarantees.md); it passes.
 *
 * <p>Remember a delivery once its work is done and reported, not when it is read: a record whose
 * work failed before that is then done again when it comes again. The memory is this process's
 * and holds the last {@code capacity} deliveries (least recently seen forgotten first), enough for
 * the redeliveries of a rebalance; a consumer that must survive its own restart keeps the keys
 * where it keeps the work's outcome. Safe for concurrent use.
 */
public final class Dedup {
    /** The number of deliveries remembered by default. */
    public static final int DEFAULT_CAPACITY = 100_000;

    private final Map<String, Boolean> done;

    public Dedup() {
        this(DEFAULT_CAPACITY);
    }

    public Dedup(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be at least 1: " + capacity);
        }
        this.done = new LinkedHashMap<>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Boolean> eldest) {
                return size() > capacity;
            }
        };
    }

    /** Whether this delivery was remembered as done. */
    public synchronized boolean seen(ReadyRecord ready) {
        return done.get(ready.deliveryKey()) != null;
    }

    /** seen, for a Kafka record (IllegalArgumentException when it is none of delayd's). */
    public boolean seen(ConsumerRecord<?, ?> record) {
        return seen(ReadyRecord.of(record));
    }

    /** Remembers this delivery as done. */
    public synchronized void remember(ReadyRecord ready) {
        done.put(ready.deliveryKey(), Boolean.TRUE);
    }

    /** remember, for a Kafka record. */
    public void remember(ConsumerRecord<?, ?> record) {
        remember(ReadyRecord.of(record));
    }

    /** How many deliveries are remembered. */
    public synchronized int size() {
        return done.size();
    }
}
