package dev.delayd.client;

/**
 * The values of repeat-catchup: what a repeating job does with the occurrences it missed
 * (docs/producing.md, "Catch-up after an outage").
 */
public final class Catchup {
    private Catchup() {}

    /** The latest missed occurrence, once (delayd's default). */
    public static final String LATEST = "latest";
    /** Every missed occurrence, oldest first. */
    public static final String ALL = "all";
    /** None: the next occurrence still to come. */
    public static final String NONE = "none";
}
