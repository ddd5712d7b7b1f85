"""The `retained` command's entry, and the hook's room: the one module a hook's command line goes through.

Hosts run `retained hook EVENT` at every session start and prompt, so what it imports is paid every
time: this module reads that command line leniently and runs retained/hook.py, importing only what a
hook needs (no argparse, no typing: importing them cost the warm prompt hook ~10% of its time, and
`tests/test_warm.py` fails on either). argparse also exits 2 on a flag it does not know, which Claude
Code reads from a prompt hook as "block this prompt" (issue 17 item 10): here whatever is wrong in the
command line (an unknown or newer flag, a bad --budget, an unknown --host, an unknown event) is noted
on stderr, the rest is used, and the exit is 0. Every other command line, and `retained hook --help`,
goes to the CLI (retained/cli.py), the one parser of the command line.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """`retained ...`: a hook here, anything else in retained/cli.py. Returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    hooked = hook_command(args)
    if hooked is not None:
        return hooked
    if args == ["serve"] or (len(args) == 3 and args[0] == "--dir" and args[2] == "serve"):
        from .transport import command  # as hosts start the server: not the CLI's parser and imports (~15 ms)

        return command(args[1] if len(args) == 3 else None)
    from .cli import main as cli_main  # argparse and every command's room: a hook never pays for them

    return cli_main(args)


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def hook_command(argv: list[str]) -> int | None:
    """`retained [--dir D] hook EVENT [--host H] [--budget N] [--dir D]` run leniently, or None when
    `argv` is another command line (or asks for help)."""
    args = list(argv)
    opts: dict[str, str] = {}
    while args and args[0] in ("--dir", "--json"):  # the options before the command
        if args[0] == "--json":
            args = args[1:]
        elif len(args) >= 2:
            opts["--dir"], args = args[1], args[2:]
        else:
            return None
    if not args or args[0] != "hook":  # before importing the hook module: `serve` must not pay for it
        return None
    rest = args[1:]
    if "-h" in rest or "--help" in rest:
        return None
    from .hook import EVENTS  # lazy: +8 ms (measured) that serve and every other command would pay

    problems: list[str] = []
    event: str | None = None
    while rest:
        arg = rest.pop(0)
        if arg.startswith("-") and len(arg) > 1:
            name, eq, value = arg.partition("=")
            if name in ("--host", "--budget", "--dir"):
                if eq:
                    opts[name] = value
                elif rest and not rest[0].startswith("--"):
                    opts[name] = rest.pop(0)
                else:
                    problems.append(f"{name} without a value was ignored")
            elif name != "--json":
                problems.append(f"unknown flag {name} was ignored")
        elif event is None:
            event = arg
        else:
            problems.append(f"unexpected argument {arg[:40]!r} was ignored")
    host = opts.get("--host")
    if host is not None:
        from .installers.hosts import get, names  # lazy, as the hook module above (which loads it too)

        if get(host) is None:
            problems.append(f"unknown --host {host[:40]!r} was ignored (known: {', '.join(names())})")
            host = None
    budget = opts.get("--budget", "800")
    if not (budget.isascii() and budget.isdigit() and len(budget) <= 9) or int(budget) < 1:
        problems.append(f"--budget {budget[:40]!r} is not a positive whole number; 800 was used")
        budget = "800"
    for problem in problems:
        _err(f"retained hook: {problem}")
    if event is None or event not in EVENTS:
        said = "no event" if event is None else f"unknown event {event[:40]!r}"
        _err(f"retained hook: skipped ({said}; use one of {', '.join(EVENTS)})")
        return 0
    dir_arg = opts.get("--dir")
    if dir_arg is not None and not dir_arg.strip():
        _err("retained hook: skipped (--dir is empty)")
        return 0
    from .hook import command  # lazy, as above

    return command(event, host, dir_arg, int(budget))
