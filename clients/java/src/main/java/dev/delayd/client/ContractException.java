package dev.delayd.client;

/**
 * A call delayd would refuse; the message is the one delayd's parser gives, where it has one
 * (the other clients' ContractError: in Java an Error is for what a program cannot recover from).
 */
public class ContractException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public ContractException(String message) {
        super(message);
    }
}
