"""A writer process for the crash and concurrency tests: prints each acknowledged record id."""

import sys

from retained.store import Store

directory, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
big = len(sys.argv) > 4 and sys.argv[4] == "big"
with Store(directory) as store:
    for i in range(count):
        text = f"{prefix} record {i} " + ("x" * (300_000 if big and i % 3 == 0 else 20))
        receipt = store.write(text, client_op_id=f"{prefix}-{i}")
        if receipt["durable"]:
            sys.stdout.write(f"{receipt['id']} {receipt['seq']}\n")
            sys.stdout.flush()
