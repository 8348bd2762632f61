package dev.delayd.example;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationPropertiesScan;

/**
 * A Spring Boot service that reminds customers of their orders through delayd: {@link Reminders}
 * schedules a reminder with Spring's KafkaTemplate, and {@link ReadyListener}, a @KafkaListener
 * on the business's ready topic, sends each one when delayd delivers it and reports it finished.
 */
@SpringBootApplication
@ConfigurationPropertiesScan
public class OrderRemindersApplication {
    public static void main(String[] args) {
        SpringApplication.run(OrderRemindersApplication.class, args);
    }
}
