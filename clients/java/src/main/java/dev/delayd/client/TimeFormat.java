package dev.delayd.client;

import java.math.BigInteger;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * delayd's times as text: epoch milliseconds or RFC 3339, read as contract/time_format.cpp reads
 * them, and Java's Instant and Duration as the milliseconds of a header, a part of a millisecond
 * rounded up (never early).
 */
public final class TimeFormat {
    private TimeFormat() {}

    /** What reading a time gives: epoch ms, or why not ({@link #SYNTAX}, ...). */
    public record Parsed(long epochMs, String error) {
        public boolean ok() {
            return error.isEmpty();
        }
    }

    public static final String SYNTAX = "syntax";
    public static final String BAD_FIELD = "bad_field";
    public static final String OUT_OF_RANGE = "out_of_range";

    private static final DateTimeFormatter MILLIS =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);
    private static final BigInteger THOUSAND = BigInteger.valueOf(1000);
    private static final BigInteger MILLION = BigInteger.valueOf(1_000_000);

    /** contract::parse_timestamp_ms: all digits is epoch ms, anything else must be RFC 3339. */
    public static Parsed parseTimestampMs(String text) {
        if (!text.isEmpty() && Texts.allDigits(text)) {
            long v = Texts.decimal(text, Contract.MAX_EPOCH_MS);
            return v < 0 ? failed(OUT_OF_RANGE) : new Parsed(v, "");
        }
        return parseRfc3339(text);
    }

    /** contract::format_rfc3339_ms: "2026-11-22T10:00:00.123Z". */
    public static String formatRfc3339Ms(long epochMs) {
        return MILLIS.format(Instant.ofEpochMilli(epochMs));
    }

    /** An instant as the decimal text of its epoch milliseconds, a part of one rounded up; any instant. */
    public static String epochMillisText(Instant t) {
        BigInteger ms = BigInteger.valueOf(t.getEpochSecond()).multiply(THOUSAND)
                .add(BigInteger.valueOf(t.getNano() / 1_000_000));
        if (t.getNano() % 1_000_000 != 0) {
            ms = ms.add(BigInteger.ONE);
        }
        return ms.toString();
    }

    /** A duration as the decimal text of its milliseconds, a part of one rounded up; any duration. */
    public static String millisText(Duration d) {
        BigInteger nanos = BigInteger.valueOf(d.getSeconds()).multiply(THOUSAND).multiply(MILLION)
                .add(BigInteger.valueOf(d.getNano()));
        BigInteger[] qr = nanos.divideAndRemainder(MILLION); // truncates toward zero
        BigInteger ms = qr[1].signum() > 0 ? qr[0].add(BigInteger.ONE) : qr[0];
        return ms.toString();
    }

    private static Parsed failed(String why) {
        return new Parsed(-1, why);
    }

    /** The value of n digits at pos, or -1 when they are not all there or not all digits. */
    private static long fixed(String s, int pos, int n) {
        if (pos + n > s.length()) {
            return -1;
        }
        String part = s.substring(pos, pos + n);
        return Texts.allDigits(part) ? Long.parseLong(part) : -1;
    }

    /** Days since 1970-01-01 of a proleptic Gregorian date, any year (0000 too). */
    static long daysFromCivil(long y, long m, long d) {
        y -= m <= 2 ? 1 : 0;
        long era = Math.floorDiv(y, 400);
        long yoe = y - era * 400;
        long doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
        long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
    }

    static long daysInMonth(long y, long m) {
        if (m == 2) {
            return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 29 : 28;
        }
        return new long[] {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[(int) m - 1];
    }

    private static Parsed parseRfc3339(String s) {
        if (s.length() < 20) {
            return failed(SYNTAX);
        }
        long year = fixed(s, 0, 4), month = fixed(s, 5, 2), day = fixed(s, 8, 2);
        long hour = fixed(s, 11, 2), minute = fixed(s, 14, 2), second = fixed(s, 17, 2);
        if (year < 0 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0 || s.charAt(4) != '-'
                || s.charAt(7) != '-' || (s.charAt(10) != 'T' && s.charAt(10) != 't') || s.charAt(13) != ':'
                || s.charAt(16) != ':') {
            return failed(SYNTAX);
        }
        int pos = 19;
        long millis = 0;
        if (s.charAt(pos) == '.') {
            pos++;
            int start = pos;
            boolean belowMs = false;
            while (pos < s.length() && s.charAt(pos) >= '0' && s.charAt(pos) <= '9') {
                if (pos - start < 3) {
                    millis = millis * 10 + (s.charAt(pos) - '0');
                } else if (s.charAt(pos) != '0') {
                    belowMs = true;
                }
                pos++;
            }
            int n = pos - start;
            if (n < 1 || n > 9) {
                return failed(SYNTAX);
            }
            for (int i = n; i < 3; i++) {
                millis *= 10;
            }
            if (belowMs) {
                millis++; // never early: a part of a millisecond rounds up
            }
        }
        if (pos >= s.length()) {
            return failed(SYNTAX);
        }
        long offsetS = 0, offH = 0, offM = 0;
        char zone = s.charAt(pos);
        if (zone == 'Z' || zone == 'z') {
            pos++;
        } else if (zone == '+' || zone == '-') {
            long oh = fixed(s, pos + 1, 2), om = fixed(s, pos + 4, 2);
            if (oh < 0 || pos + 3 >= s.length() || s.charAt(pos + 3) != ':' || om < 0) {
                return failed(SYNTAX);
            }
            offH = oh;
            offM = om;
            offsetS = (oh * 3600 + om * 60) * (zone == '-' ? -1 : 1);
            pos += 6;
        } else {
            return failed(SYNTAX);
        }
        if (pos != s.length()) {
            return failed(SYNTAX);
        }
        if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month) || hour > 23 || minute > 59
                || second > 60 || offH > 23 || offM > 59) {
            return failed(BAD_FIELD);
        }
        long days = daysFromCivil(year, month, day);
        long ms = (days * 86400 + hour * 3600 + minute * 60 + second - offsetS) * 1000 + millis;
        if (ms < 0 || ms > Contract.MAX_EPOCH_MS) {
            return failed(OUT_OF_RANGE);
        }
        return new Parsed(ms, "");
    }
}
