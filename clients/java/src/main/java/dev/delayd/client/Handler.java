package dev.delayd.client;

import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * The work {@link Work} does for one ready record. Returning is success (reported finished);
 * throwing is the job's failure (reported failed with the exception's text; throw {@link Retry}
 * to choose the retry time).
 */
@FunctionalInterface
public interface Handler {
    void handle(ConsumerRecord<byte[], byte[]> ready) throws Exception;
}
