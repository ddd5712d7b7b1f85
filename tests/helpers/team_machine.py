"""One machine's sync in a process of its own, for the concurrency and kill -9 tests.

    python team_machine.py STORE REMOTE PROJECT [--write N PREFIX] [--die-at NAME] [--wait S]

`--write N PREFIX` first writes N decisions to the store; `--die-at NAME` kills this process with
SIGKILL when the sync engine reaches the method NAME of its run (fault injection: e.g. `_install`,
`_commit`, `_pushed`, `push`); prints the SyncResult as one JSON line.
"""

import argparse
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from retained.store import Store
from retained.team import git as team_git
from retained.team import state
from retained.team import sync as team_sync
from tests.helpers.team import outgoing_of, read_log


def die_at(name: str) -> None:
    """Replace the method `name` (of the sync run, or of Git) by one that kills this process first."""
    owner = team_git.Git if hasattr(team_git.Git, name) else team_sync._Run

    def killed(*args, **kwargs):
        sys.stdout.write("dying\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(owner, name, killed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("remote")
    ap.add_argument("project")
    ap.add_argument("--write", nargs=2)
    ap.add_argument("--die-at")
    ap.add_argument("--wait", type=float, default=30.0)
    args = ap.parse_args()
    store_dir = Path(args.store)
    if args.write:
        with Store(store_dir) as store:
            for i in range(int(args.write[0])):
                store.write(f"{args.write[1]} decision {i}", kind="decision", scope=args.project)
    outgoing, purges = outgoing_of(read_log(store_dir))
    if args.die_at:
        die_at(args.die_at)
    result = team_sync.sync(state.project_dir(store_dir, args.project), args.remote, state.writer_id(store_dir),
                            outgoing, purges, author=team_git.author(), wait=args.wait)
    sys.stdout.write(json.dumps(result.as_dict()) + "\n")


if __name__ == "__main__":
    main()
