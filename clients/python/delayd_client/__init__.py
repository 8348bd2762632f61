"""delayd-client: publish delayed jobs to delayd, and report on their ready records.

    from delayd_client import Client
    client = Client("127.0.0.1:19092")
    client.schedule("orders", b"charge order 42", delay=60_000, job_id="order-42")
    client.flush()

records.py builds and checks the records (no Kafka needed); client.py sends them with
confluent-kafka, and work() runs a handler over a ready topic with status reports.
"""
from .client import Client, DeliveryError, Retry, work
from .records import (CONTRACT_VERSION, ContractError, Record, cancel_record, report_record, reschedule_record,
                      schedule_record)

__version__ = "1.0.0"
__all__ = ["CONTRACT_VERSION", "Client", "ContractError", "DeliveryError", "Record", "Retry", "cancel_record",
           "report_record", "reschedule_record", "schedule_record", "work"]
