package dev.delayd.example;

import dev.delayd.client.ReadyRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/**
 * The work of a due reminder: here it is logged; a real service would send a mail or a push
 * message. Throwing fails the job, and delayd delivers it again after its backoff.
 */
@Component
public class ReminderSender {
    private static final Logger log = LoggerFactory.getLogger(ReminderSender.class);

    public void send(ReadyRecord ready, String text) {
        log.info("reminder {} for order {} (attempt {}, due {}): {}", ready.jobId(), ready.header("order-id"),
                ready.attempt(), ready.deliverAt(), text);
    }
}
