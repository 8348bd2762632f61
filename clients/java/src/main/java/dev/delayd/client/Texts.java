package dev.delayd.client;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

/** How delayd's messages write values, and the decimal texts of its headers. */
final class Texts {
    private Texts() {}

    private static final int QUOTE_MAX_BYTES = 80;

    /**
     * config::quote_for_message: in double quotes, \ and " escaped, bytes outside 0x20-0x7e as
     * \xNN, cut after 80 bytes with "...".
     */
    static String quote(byte[] data) {
        StringBuilder b = new StringBuilder("\"");
        for (int n = 0; n < data.length; n++) {
            if (n == QUOTE_MAX_BYTES) {
                b.append("...");
                break;
            }
            int c = data[n] & 0xff;
            if (c == '"' || c == '\\') {
                b.append('\\').append((char) c);
            } else if (c >= 0x20 && c <= 0x7e) {
                b.append((char) c);
            } else {
                b.append(String.format("\\x%02x", c));
            }
        }
        return b.append('"').toString();
    }

    static String quote(String text) {
        return quote(utf8(text));
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** "header 'name'", as delayd's messages name a header. */
    static String ref(String name) {
        return "header '" + name + "'";
    }

    static boolean allDigits(String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                return false;
            }
        }
        return true;
    }

    /**
     * The value of a text of decimal digits (any length, leading zeros too), or -1 when it is
     * empty, not all digits, or above limit (limit is at most Long.MAX_VALUE).
     */
    static long decimal(String s, long limit) {
        if (s.isEmpty() || !allDigits(s)) {
            return -1;
        }
        BigInteger v = new BigInteger(s);
        return v.compareTo(BigInteger.valueOf(limit)) > 0 ? -1 : v.longValueExact();
    }

    /** number_header(): decimal digits only, within [lo, hi]. */
    static void checkNumber(String name, String text, long lo, long hi) {
        long v = decimal(text, hi);
        if (v < lo) {
            throw new ContractException(
                    ref(name) + " must be a decimal number from " + lo + " to " + hi + ": " + quote(text));
        }
    }
}
