// __OWNED__
// lockyard for pi: the lock tools of `lockyard serve` (started here, spoken to over MCP on
// its stdin/stdout) offered as pi tools, and a guard that asks lockyard before each write or
// shell call and blocks the call when lockyard refuses it.
import { spawn, spawnSync } from "node:child_process";

const COMMAND = __COMMAND__;
const SERVE_ARGS = __SERVE_ARGS__;
const HOOK_ARGS = __HOOK_ARGS__;
const GUARDED = new Set(__GUARDED__);

__ASK_GUARD__

function startServer() {
  const child = spawn(COMMAND, SERVE_ARGS, { stdio: ["pipe", "pipe", "ignore"] });
  const pending = new Map();
  let next = 1;
  let buffered = "";
  let failure = null;
  const failAll = (error) => {
    failure = error;
    for (const settle of pending.values()) settle.reject(error);
    pending.clear();
    holdWhileBusy();
  };
  child.on("error", (error) => failAll(new Error(`lockyard serve did not start: ${error.message}`)));
  child.on("exit", (code) => failAll(new Error(`lockyard serve exited (code ${code})`)));
  // pi exits when its work is done, not when this server ends (its stdin closing then ends
  // the server, which gives back its locks): the pipes keep pi alive only while a call is
  // out.
  child.unref();
  child.stdin.unref();
  const holdWhileBusy = () => (pending.size > 0 ? child.stdout.ref() : child.stdout.unref());
  holdWhileBusy();
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    buffered += chunk;
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (!line) continue;
      const message = JSON.parse(line);
      const settle = pending.get(message.id);
      if (settle === undefined) continue;
      pending.delete(message.id);
      holdWhileBusy();
      if (message.error) settle.reject(new Error(message.error.message));
      else settle.resolve(message.result);
    }
  });
  const send = (message) => child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
  return {
    request(method, params) {
      if (failure !== null) return Promise.reject(failure);
      const id = next++;
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject });
        holdWhileBusy();
        send({ id, method, params });
      });
    },
    notify(method, params) {
      send({ method, params });
    },
  };
}

export default async function lockyard(pi) {
  const server = startServer();
  await server.request("initialize", {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "lockyard-pi-extension", version: "1" },
  });
  server.notify("notifications/initialized", {});
  const { tools } = await server.request("tools/list", {});
  for (const tool of tools) {
    pi.registerTool({
      name: tool.name,
      label: tool.name,
      description: tool.description ?? "",
      parameters: tool.inputSchema,
      async execute(_callId, params) {
        const result = await server.request("tools/call", { name: tool.name, arguments: params });
        const text = (result.content ?? []).map((part) => part.text ?? "").join("\n");
        if (result.isError) throw new Error(text);
        return { content: [{ type: "text", text }], details: {} };
      },
    });
  }

  pi.on("tool_call", async (event, ctx) => {
    if (!GUARDED.has(event.toolName)) return;
    const call = { tool_name: event.toolName, tool_input: event.input ?? {}, cwd: ctx.cwd };
    const reason = refusal(await askGuard(JSON.stringify(call)));
    if (reason !== null) return { block: true, reason };
  });
}
