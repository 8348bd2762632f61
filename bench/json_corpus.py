#!/usr/bin/env python3
"""A corpus of realistic job values for the compression benchmark (bench/run-compression.sh).

JSON documents of about 1 KiB, one per line, as the teams that use a delay broker publish them:
order timeouts (an order with its lines, a customer, an address) and reminders (a user, a
channel, a template and its variables). Field names repeat within a document and across
documents; values vary (ids, names, amounts, times), so that the figure is neither random bytes
(which nothing compresses) nor one value repeated (which everything does).

    bench/json_corpus.py COUNT [SEED] [--varied] > corpus.jsonl

--varied: the same documents with values that share less: customers, streets, products and
cities drawn from thousands of made-up words instead of a few dozen, ids as UUIDs, and a note of
free text in each (what a dictionary cannot learn). Deterministic for a given COUNT and SEED
(default 1).
"""
import json
import random
import sys
import uuid

FIRST = ["Ada", "Bertrand", "Chiara", "Dmitri", "Esther", "Farid", "Grace", "Hiro", "Ines", "Jonas",
         "Kemal", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tomoko"]
LAST = ["Lovelace", "Russell", "Rossi", "Ivanov", "Cohen", "Haddad", "Hopper", "Tanaka", "Garcia",
        "Berg", "Yilmaz", "Schmidt", "Lopez", "Karim", "Nilsson", "Patel", "Dupont", "Silva"]
CITIES = [("Lisbon", "PT", "1100-148"), ("Berlin", "DE", "10115"), ("Lyon", "FR", "69002"),
          ("Austin", "US", "78701"), ("Osaka", "JP", "530-0001"), ("Porto", "PT", "4000-322"),
          ("Utrecht", "NL", "3511"), ("Turin", "IT", "10121"), ("Leeds", "GB", "LS1 4DY")]
PRODUCTS = [("SKU-10021", "Espresso beans 1 kg", 18.9), ("SKU-20417", "Ceramic pour-over dripper", 24.5),
            ("SKU-31008", "Paper filters, 100", 4.2), ("SKU-40233", "Burr grinder", 129.0),
            ("SKU-51190", "Milk frother", 39.99), ("SKU-62210", "Travel mug 350 ml", 21.0),
            ("SKU-73305", "Descaling tablets", 9.5), ("SKU-84402", "Gooseneck kettle", 64.0)]
TEMPLATES = ["payment-reminder", "trial-ending", "cart-abandoned", "appointment-tomorrow",
             "subscription-renewal", "invoice-overdue"]


def order(rng, i):
    city, country, postcode = rng.choice(CITIES)
    lines = []
    for n in range(rng.randint(4, 6)):
        sku, name, price = rng.choice(PRODUCTS)
        qty = rng.randint(1, 4)
        lines.append({"line": n + 1, "sku": sku, "name": name, "quantity": qty, "unit_price": price,
                      "currency": "EUR", "total": round(qty * price, 2), "warehouse": rng.choice(["LIS-1", "BER-2", "AMS-1"])})
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return {
        "type": "order.payment_timeout",
        "order_id": f"ord-{rng.randrange(10**9):09d}",
        "created_at": f"2026-12-0{rng.randint(1, 9)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z",
        "customer": {"id": f"cus-{rng.randrange(10**7):07d}", "first_name": first, "last_name": last,
                     "email": f"{first.lower()}.{last.lower()}{i % 97}@example.com", "locale": rng.choice(["en-GB", "pt-PT", "de-DE", "fr-FR"])},
        "shipping_address": {"street": f"{rng.randint(1, 250)} {rng.choice(LAST)} Street", "city": city,
                             "postcode": postcode, "country": country},
        "lines": lines,
        "payment": {"method": rng.choice(["card", "sepa_debit", "paypal"]), "status": "pending",
                    "amount": round(sum(l["total"] for l in lines), 2), "currency": "EUR"},
        "on_timeout": {"action": "cancel_order", "notify": ["customer", "warehouse"], "release_stock": True},
    }


def reminder(rng, i):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    return {
        "type": "reminder.send",
        "reminder_id": f"rem-{rng.randrange(10**10):010d}",
        "user": {"id": f"usr-{rng.randrange(10**8):08d}", "name": f"{first} {last}",
                 "email": f"{first.lower()}.{last.lower()}{i % 89}@example.org", "timezone": rng.choice(["Europe/Lisbon", "Europe/Berlin", "America/Chicago", "Asia/Tokyo"])},
        "channel": rng.choice(["email", "sms", "push"]),
        "template": rng.choice(TEMPLATES),
        "variables": {"invoice_number": f"INV-2026-{rng.randrange(10**6):06d}", "amount_due": f"{rng.randint(5, 900)}.{rng.randint(0, 99):02d}",
                      "currency": "EUR", "due_date": f"2026-12-{rng.randint(10, 31):02d}",
                      "account_url": f"https://billing.example.com/accounts/{rng.randrange(10**7)}/invoices",
                      "support_email": "billing-support@example.com"},
        "attempt": rng.randint(1, 3),
        "escalation": [{"after_hours": 24, "channel": "email"}, {"after_hours": 72, "channel": "sms"},
                       {"after_hours": 168, "channel": "phone", "team": "collections"}],
        "tags": rng.sample(["dunning", "b2c", "b2b", "priority", "eu", "us", "trial"], 3),
        "preview": f"Hello {first}, a friendly reminder that invoice INV-2026-{rng.randrange(10**6):06d} is due soon.",
        "unsubscribe_url": f"https://mail.example.com/u/{rng.randrange(16**12):012x}",
    }


def word(rng):
    """A made-up word of two to four syllables."""
    return "".join(rng.choice("bcdfghjklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))


def vary(rng):
    """Widens the word lists to thousands of made-up entries (--varied)."""
    FIRST[:] = [word(rng).capitalize() for _ in range(2000)]
    LAST[:] = [word(rng).capitalize() for _ in range(5000)]
    CITIES[:] = [(word(rng).capitalize(), rng.choice(["PT", "DE", "FR", "US", "JP", "NL", "IT", "GB"]),
                  f"{rng.randrange(10**5):05d}") for _ in range(3000)]
    PRODUCTS[:] = [(f"SKU-{rng.randrange(10**6):06d}", " ".join(word(rng) for _ in range(rng.randint(2, 4))),
                    round(rng.uniform(1, 300), 2)) for _ in range(20000)]


def with_noise(rng, doc, vocabulary):
    """UUIDs for the ids, and a note of free text."""
    for key in ("order_id", "reminder_id"):
        if key in doc:
            doc[key] = str(uuid.UUID(int=rng.getrandbits(128)))
    doc["note"] = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 20)))
    return doc


def main():
    args = [a for a in sys.argv[1:] if a != "--varied"]
    varied = len(args) != len(sys.argv) - 1
    if not args:
        sys.exit("usage: json_corpus.py COUNT [SEED] [--varied]")
    count, seed = int(args[0]), int(args[1]) if len(args) > 1 else 1
    rng = random.Random(seed)
    vocabulary = []
    if varied:
        vary(rng)
        vocabulary = [word(rng) for _ in range(20000)]
    for i in range(count):
        doc = order(rng, i) if i % 2 == 0 else reminder(rng, i)
        if varied:
            doc = with_noise(rng, doc, vocabulary)
        print(json.dumps(doc, separators=(",", ":")))


if __name__ == "__main__":
    main()
