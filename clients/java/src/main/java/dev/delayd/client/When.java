package dev.delayd.client;

import java.time.Duration;
import java.time.Instant;
import java.util.List;

/**
 * The time of a job: an instant (deliver-at) or a delay after its record's timestamp (delay-ms).
 * The argument of {@link Client#reschedule}; {@link ScheduleOptions} has the same five setters.
 */
public final class When {
    final String at;    // the deliver-at header's text, or null
    final String delay; // the delay-ms header's text, or null

    private When(String at, String delay) {
        this.at = at;
        this.delay = delay;
    }

    /** Due at t, sent as epoch ms; a part of a millisecond rounds up, never early. */
    public static When at(Instant t) {
        return atText(TimeFormat.epochMillisText(t));
    }

    /** Due at this instant in epoch milliseconds. */
    public static When atMillis(long epochMs) {
        return atText(Long.toString(epochMs));
    }

    /** Due at this instant as delayd reads it: epoch ms or RFC 3339 text, sent as written. */
    public static When atText(String text) {
        return new When(text, null);
    }

    /** Due this long after the record's timestamp; a part of a millisecond rounds up. */
    public static When delay(Duration d) {
        return new When(null, TimeFormat.millisText(d));
    }

    /** Due this many milliseconds after the record's timestamp. */
    public static When delayMillis(long ms) {
        return new When(null, Long.toString(ms));
    }

    /** The time headers of at and delay, checked: deliver-at or delay-ms, and the instant when known. */
    record Checked(List<Header> headers, long atMs) {}

    /** at and delay (either may be null) as one header, checked as delayd checks it. */
    static Checked check(String at, String delay, boolean optional) {
        if (at != null && delay != null) {
            throw new ContractException("both deliver-at and delay-ms given");
        }
        if (at != null) {
            return new Checked(List.of(Header.of(Contract.DELIVER_AT, at)), checkDeliverAt(at));
        }
        if (delay != null) {
            checkDelay(delay);
            return new Checked(List.of(Header.of(Contract.DELAY_MS, delay)), -1);
        }
        if (optional) {
            return new Checked(List.of(), -1);
        }
        throw new ContractException("missing header 'deliver-at' (or 'delay-ms')");
    }

    private static long checkDeliverAt(String text) {
        TimeFormat.Parsed p = TimeFormat.parseTimestampMs(text);
        String what = switch (p.error()) {
            case "" -> null;
            case TimeFormat.SYNTAX -> "is not epoch milliseconds or RFC 3339";
            case TimeFormat.BAD_FIELD -> "is not a valid date and time";
            default -> "is outside 1970-01-01T00:00:00Z..9999-12-31T23:59:59.999Z";
        };
        if (what != null) {
            throw new ContractException(Texts.ref(Contract.DELIVER_AT) + " " + what + ": " + Texts.quote(text));
        }
        return p.epochMs();
    }

    private static void checkDelay(String text) {
        if (text.isEmpty() || !Texts.allDigits(text)) {
            throw new ContractException(Texts.ref(Contract.DELAY_MS)
                    + " is not a non-negative decimal number of milliseconds: " + Texts.quote(text));
        }
        if (Texts.decimal(text, Contract.MAX_EPOCH_MS) < 0) {
            throw new ContractException(Texts.ref(Contract.DELAY_MS) + " is too large: " + Texts.quote(text));
        }
    }
}
