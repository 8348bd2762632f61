package dev.delayd.client;

import java.time.Duration;

/**
 * Thrown by a {@link Handler}: report the job failed with this message, and have it delivered
 * again after {@link #after} instead of delayd's backoff (null: delayd's backoff).
 */
public class Retry extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final Duration after;

    public Retry(String message, Duration after) {
        super(message);
        this.after = after;
    }

    public Retry(String message, Duration after, Throwable cause) {
        super(message, cause);
        this.after = after;
    }

    /** When the job is delivered again, after the report is applied; null for delayd's backoff. */
    public Duration after() {
        return after;
    }
}
