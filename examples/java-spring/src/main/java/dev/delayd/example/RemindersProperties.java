package dev.delayd.example;

import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Where the reminders go (application.properties, reminders.*): the business, the deployment's
 * ingest and status topics, and the business's ready topic.
 */
@ConfigurationProperties("reminders")
public record RemindersProperties(String business, String ingestTopic, String statusTopic, String readyTopic) {}
