package dev.delayd.client;

import java.time.Duration;

/** The options of a status report ({@link Client#report}, {@link Records#reportRecord}). */
public final class ReportOptions {
    String error, retryAfter;

    /** Why the job failed (header error). */
    public ReportOptions error(String text) {
        error = text;
        return this;
    }

    /**
     * Deliver the failed job again after d (retry-after-ms, 0 to 24 h) instead of delayd's backoff;
     * a part of a millisecond rounds up. Only for {@link Status#FAILED}.
     */
    public ReportOptions retryAfter(Duration d) {
        retryAfter = TimeFormat.millisText(d);
        return this;
    }
}
