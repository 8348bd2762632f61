package dev.delayd.client;

/**
 * The statuses a worker reports about a ready record (docs/consuming.md, "Status reports"). They
 * are strings, as in delayd's records: a status outside these is refused by
 * {@link Records#reportRecord} with delayd's own message.
 */
public final class Status {
    private Status() {}

    public static final String RUNNING = "running";
    public static final String FINISHED = "finished";
    public static final String FAILED = "failed";
}
