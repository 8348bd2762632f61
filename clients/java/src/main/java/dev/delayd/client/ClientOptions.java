package dev.delayd.client;

import java.util.HashMap;
import java.util.Map;

/**
 * The options of a {@link Client}: the deployment's topic names (kafka.ingest_topic,
 * kafka.status_topic) and more settings for the producer the client makes (TLS, SASL, a client
 * id: kafka-clients' names and values).
 */
public final class ClientOptions {
    String ingestTopic = Contract.DEFAULT_INGEST_TOPIC;
    String statusTopic = Contract.DEFAULT_STATUS_TOPIC;
    final Map<String, Object> producerConfig = new HashMap<>();

    /** The deployment's kafka.ingest_topic (default "delay-ingest"). */
    public ClientOptions ingestTopic(String name) {
        ingestTopic = name;
        return this;
    }

    /** The deployment's kafka.status_topic (default "delay-status"). */
    public ClientOptions statusTopic(String name) {
        statusTopic = name;
        return this;
    }

    /** A setting of the producer the client makes, over {@link Client#producerConfig}'s. */
    public ClientOptions producerConfig(String name, Object value) {
        producerConfig.put(name, value);
        return this;
    }
}
