"""A process for the purge crash test: writes a record to keep and one to purge, purges it, repeats.

Prints `keep ID` after each acknowledged write it keeps and `purged ID` after each acknowledged purge.
A fourth argument lowers the full-text level count at which compaction rebuilds
(see retained.index.repair.FTS_LEVELS_MAX).
"""

import sys

import retained.index.repair
from retained.store import Store

directory, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if len(sys.argv) > 4:  # the full-text level count past which a purge's compaction rebuilds instead
    retained.index.repair.FTS_LEVELS_MAX = int(sys.argv[4])
with Store(directory) as store:
    for i in range(count):
        keep = store.write(f"{prefix} keeps record {i}")
        if keep["durable"]:  # one write per line: under PYTHONUNBUFFERED a print is several
            sys.stdout.write(f"keep {keep['id']}\n")
            sys.stdout.flush()
        doomed = store.write(f"{prefix} doomed{i}-QuillWhisperMarmalade {i}")
        receipt = store.purge([doomed["id"]], "crash test")
        if receipt["durable"]:
            sys.stdout.write(f"purged {doomed['id']}\n")
            sys.stdout.flush()
