package dev.delayd.client;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** The options of {@link Work#work}. */
public final class WorkOptions {
    Duration heartbeat;
    int count;
    Duration pollTimeout = Duration.ofMillis(500);
    BooleanSupplier stop = () -> false;

    /**
     * Repeat the running report this often while the handler runs, so that delayd does not deliver
     * the job again; less than the business's scheduler.ack_timeout_ms.
     */
    public WorkOptions heartbeat(Duration every) {
        heartbeat = every;
        return this;
    }

    /** Return after n records (0, the default: until stopped). */
    public WorkOptions count(int n) {
        count = n;
        return this;
    }

    /** How long one poll of the consumer waits (default 500 ms); stop is asked between polls. */
    public WorkOptions pollTimeout(Duration d) {
        pollTimeout = d;
        return this;
    }

    /** Return once this says true (asked before each poll and each record). */
    public WorkOptions stop(BooleanSupplier s) {
        stop = s;
        return this;
    }
}
