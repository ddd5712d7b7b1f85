// retained: memory for coding agents. Written by `retained install`; `retained uninstall` removes it.
// OpenCode has no command hooks, so this plugin runs retained's hooks for it:
// - the session's brief goes into the system prompt of every request (so it survives compaction);
// - when OpenCode compacts a session, the compaction prompt asks to keep the state with memory_checkpoint.
// It fails open: if retained cannot run, the session goes on without memory.
import { spawnSync } from "node:child_process";

const HOOK = __RETAINED_HOOK_ARGV__;

function run(event, input) {
  try {
    const done = spawnSync(HOOK[0], [...HOOK.slice(1), event, "--host", "opencode"], {
      input: JSON.stringify(input), encoding: "utf8", timeout: 30000,
    });
    const out = (done.stdout || "").trim();
    if (!out) return null;
    if (!out.startsWith("{")) return out;
    const data = JSON.parse(out);
    return (data.hookSpecificOutput && data.hookSpecificOutput.additionalContext) || null;
  } catch {
    return null;
  }
}

export const RetainedMemory = async ({ directory }) => {
  const briefs = new Map();
  // the session's instance may sit at a parent folder; the process runs where the user started OpenCode
  const cwd = process.cwd() || directory;
  return {
    "experimental.chat.system.transform": async (input, output) => {
      const sid = (input && input.sessionID) || "opencode";
      if (!briefs.has(sid)) {
        briefs.set(sid, run("session-start", { session_id: sid, cwd, hook_event_name: "SessionStart", source: "startup" }));
      }
      const brief = briefs.get(sid);
      if (brief) output.system.push(brief);
    },
    "experimental.session.compacting": async (input, output) => {
      const sid = (input && input.sessionID) || "opencode";
      const ask = run("pre-compact", { session_id: sid, cwd, hook_event_name: "PreCompact" });
      if (ask) output.context.push(ask);
    },
  };
};
