#!/bin/sh
# The plugin's launcher: every hook and the MCP server of the Claude Code plugin, the Codex plugin, the
# Agent Plugin and the Gemini extension run `sh <plugin root>/hooks/launch.sh ARGS...` (ARGS as for
# `retained`, e.g. `serve` or `hook session-start`).
#
# This file is the fast path and decides where things are; hooks/launch.py does everything slow (the
# version check of a `retained` on PATH, the private environment, the stand-in server while it is made).
# It prints nothing on stdout: the server's stdout is the protocol and a hook's is its answer.
#
#   1. a `retained` on PATH already checked to be this plugin's version     -> exec it
#   2. the private environment of this version, made before                 -> exec its retained
#   3. anything else                                                        -> python3 hooks/launch.py
#
# The private environment lives in the host's data folder for the plugin, never under the plugin's own
# folder (a local-path plugin runs in place, in the user's checkout): ${CLAUDE_PLUGIN_DATA} or
# ${PLUGIN_DATA} when the host gives one; else, for a copy the host installed under
# <home>/plugins/cache/<marketplace>/<plugin>/<version> (Claude Code and Codex lay them out so), the
# host's <home>/plugins/data/<plugin>-<marketplace>, the folder it gives that plugin's hooks and removes
# on uninstall; else retained-plugin in the user data folder ($XDG_DATA_HOME/retained-plugin, beside the store, not in it).
# On the hook path every fork counts (issue 30: <= 20 ms over the hook itself): shell builtins only, and
# one subshell when the host named this script by a relative path (Codex: ./hooks/launch.sh).
root=${0%/*}
root=${root%/hooks}
case $root in
  /*) ;;
  *) root=$(CDPATH='' cd -- "${root:-.}" && pwd -P) || exit 0 ;;
esac
version=
while IFS= read -r line; do
  case $line in '__version__ = "'*'"') version=${line#*\"}; version=${version%\"} ;; esac
done < "$root/retained/__init__.py"
data=${CLAUDE_PLUGIN_DATA:-${PLUGIN_DATA:-}}
if [ -z "$data" ]; then
  case $root in
    */plugins/cache/*/*/*)
      up=${root%/*}; plugin=${up##*/}; up=${up%/*}; market=${up##*/}; up=${up%/*}
      data=${up%/cache}/data/$plugin-$market ;;
    *) data=${XDG_DATA_HOME:-${HOME:-/tmp}/.local/share}/retained-plugin ;;
  esac
fi
# The server: a host that starts it in the plugin's folder (Codex: cwd ".", no project variable) still
# means the user's project, which is where the host itself runs.
if [ "${1:-}" = serve ] && [ "$(pwd -P)" = "$(cd -- "$root" && pwd -P)" ]; then
  here=$(readlink "/proc/$PPID/cwd" 2>/dev/null) ||
    here=$(lsof -a -p "$PPID" -d cwd -Fn 2>/dev/null | sed -n 's/^n//p')
  if [ -n "$here" ] && [ "$here" != "$(pwd -P)" ] && [ -d "$here" ]; then cd "$here" || :; fi
fi
export RETAINED_PLUGIN_ROOT="$root" RETAINED_PLUGIN_DATA="$data" RETAINED_PLUGIN_VERSION="$version"
stamp="$data/on-path-$version"
if [ -f "$stamp" ]; then
  IFS= read -r onpath < "$stamp" || :
  if [ -x "$onpath" ] && [ ! "$onpath" -nt "$stamp" ]; then exec "$onpath" "$@"; fi
fi
env="$data/env-$version"
if [ -f "$env/ready" ]; then exec "$env/bin/retained" "$@"; fi
exec "${RETAINED_PLUGIN_PYTHON:-python3}" "$root/hooks/launch.py" "$@"
