package dev.delayd.client;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * One Kafka record header: a name and its bytes; a null value is a header without a value. Equal
 * when the names and the bytes are.
 */
public record Header(String key, byte[] value) {
    public Header {
        Objects.requireNonNull(key, "key");
    }

    /** A header whose value is text, sent as UTF-8 (null: a header without a value). */
    public static Header of(String key, String value) {
        return new Header(key, value == null ? null : value.getBytes(StandardCharsets.UTF_8));
    }

    /** The value as UTF-8 text, or null for a header without a value. */
    public String text() {
        return value == null ? null : new String(value, StandardCharsets.UTF_8);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Header h && key.equals(h.key) && Arrays.equals(value, h.value);
    }

    @Override
    public int hashCode() {
        return 31 * key.hashCode() + Arrays.hashCode(value);
    }

    @Override
    public String toString() {
        return key + "=" + (value == null ? "(none)" : Texts.quote(value));
    }
}
