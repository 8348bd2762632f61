package dev.delayd.client;

/**
 * The role of the topic a record goes to; the names are the deployment's (kafka.ingest_topic,
 * kafka.status_topic), given to the {@link Client} by {@link ClientOptions}.
 */
public enum Topic {
    /** kafka.ingest_topic: schedules, cancels, reschedules. */
    INGEST("ingest"),
    /** kafka.status_topic: a worker's reports. */
    STATUS("status");

    private final String role;

    Topic(String role) {
        this.role = role;
    }

    /** "ingest" or "status", as clients/vectors/ names them. */
    public String role() {
        return role;
    }
}
