// __OWNED__
// Before each write or shell call, ask lockyard whether this session holds the files.
import { spawnSync } from "node:child_process";

const COMMAND = __COMMAND__;
const HOOK_ARGS = __HOOK_ARGS__;
const GUARDED = new Set(__GUARDED__);

__ASK_GUARD__
export const LockyardGuard = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    if (!GUARDED.has(input.tool)) return;
    const call = { tool_name: input.tool, tool_input: output.args ?? {}, cwd: directory };
    const reason = refusal(await askGuard(JSON.stringify(call)));
    if (reason !== null) throw new Error(reason);
  },
});
