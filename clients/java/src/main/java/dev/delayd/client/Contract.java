package dev.delayd.client;

import java.util.List;

/**
 * The names and limits of delayd's contract (README, "The contract"; delayd's home for them:
 * contract/ingest_parse.hpp). clients/vectors/ states the contract version too, and this
 * package's major version follows it.
 */
public final class Contract {
    private Contract() {}

    /** The contract version these records follow. */
    public static final int CONTRACT_VERSION = 1;
    /** This client's version; its major version is {@link #CONTRACT_VERSION}. */
    public static final String CLIENT_VERSION = "1.0.0";

    /** The topic names a deployment has when it sets no kafka.ingest_topic, kafka.status_topic. */
    public static final String DEFAULT_INGEST_TOPIC = "delay-ingest";
    public static final String DEFAULT_STATUS_TOPIC = "delay-status";

    // Header names.
    public static final String OP = "op";
    public static final String JOB_ID = "job-id";
    public static final String DELIVER_AT = "deliver-at";
    public static final String DELAY_MS = "delay-ms";
    public static final String BUSINESS = "business";
    public static final String ATTEMPT = "attempt";
    public static final String REPEAT_EVERY = "repeat-every-ms";
    public static final String REPEAT_COUNT = "repeat-count";
    public static final String REPEAT_CRON = "repeat-cron";
    public static final String REPEAT_TZ = "repeat-tz";
    public static final String REPEAT_UNTIL = "repeat-until";
    public static final String REPEAT_CATCHUP = "repeat-catchup";
    public static final String MAX_LATENESS = "max-lateness-ms";
    public static final String REPEAT = "repeat";
    public static final String REDRIVE_COUNT = "redrive-count";
    public static final String STATUS = "status";
    public static final String ERROR = "error";
    public static final String RETRY_AFTER = "retry-after-ms";

    /**
     * The headers a caller may not pass among its own: the client writes them from its arguments,
     * or delayd writes them on the ready record.
     */
    public static final List<String> RESERVED = List.of(OP, JOB_ID, DELIVER_AT, DELAY_MS, BUSINESS, ATTEMPT,
            REPEAT_EVERY, REPEAT_COUNT, REPEAT_CRON, REPEAT_TZ, REPEAT_UNTIL, REPEAT_CATCHUP, MAX_LATENESS, REPEAT,
            REDRIVE_COUNT);

    // Limits.
    /** 9999-12-31T23:59:59.999Z. */
    public static final long MAX_EPOCH_MS = 253_402_300_799_999L;
    public static final int MAX_BUSINESS_CHARS = 100;
    public static final int MAX_JOB_ID_CHARS = 200;
    /** The prefix of the job-ids delayd derives; no producer may choose one. */
    public static final String DERIVED_JOB_ID_PREFIX = "auto:";
    static final long MAX_INTERVAL_MS = 1L << 53; // repeat-every-ms, max-lateness-ms
    static final long MAX_REPEAT_COUNT = 1_000_000_000L;
    static final long MAX_ATTEMPT = 1_000_000_000L;
    static final long MAX_RETRY_AFTER_MS = 86_400_000L;

    // Values of op.
    static final String OP_UPSERT = "upsert";
    static final String OP_CANCEL = "cancel";
    static final String OP_RESCHEDULE = "reschedule";
}
