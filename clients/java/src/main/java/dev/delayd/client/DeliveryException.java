package dev.delayd.client;

import java.util.List;

/** Kafka did not acknowledge records a {@link Client} sent (the other clients' DeliveryError). */
public class DeliveryException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DeliveryException(List<Exception> errors) {
        super(errors.size() + " record(s) not acknowledged: " + String.join("; ", errors.stream()
                .map(e -> e.getClass().getSimpleName() + ": " + e.getMessage()).toList()));
        errors.forEach(this::addSuppressed);
    }
}
