package dev.delayd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.junit.jupiter.api.Test;

/** The consumers the client makes read committed records only, unless told otherwise. */
class ConsumersTest {
    @Test
    void readCommittedByDefault() {
        Map<String, Object> c = Consumers.config("127.0.0.1:1", "g");
        assertEquals("read_committed", c.get(ConsumerConfig.ISOLATION_LEVEL_CONFIG));
        assertEquals(false, c.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG));
        assertEquals("earliest", c.get(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG));
        assertEquals("g", c.get(ConsumerConfig.GROUP_ID_CONFIG));
        // kafka-clients' own default is the other one: this is what the client changes.
        assertEquals("read_uncommitted", new ConsumerConfig(Map.of(
                ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, c.get(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG),
                ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, c.get(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG)))
                .getString(ConsumerConfig.ISOLATION_LEVEL_CONFIG));
    }

    @Test
    void aSettingGivenIsKept() {
        Map<String, Object> mine = new HashMap<>(Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted",
                ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest"));
        Map<String, Object> c = Consumers.withDefaults(mine);
        assertEquals("read_uncommitted", c.get(ConsumerConfig.ISOLATION_LEVEL_CONFIG));
        assertEquals("latest", c.get(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG));
        assertEquals(false, c.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG));
        try (var consumer = Consumers.create("127.0.0.1:1", "g")) { // a KafkaConsumer accepts the settings
            assertEquals(0, consumer.assignment().size());
        }
    }
}
