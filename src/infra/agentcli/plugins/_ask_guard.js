// The guard: the sessions' own `lockyard serve` processes answer it on 127.0.0.1 in about a
// millisecond. When none answers (none runs yet, or another lock directory's holds the port),
// `lockyard hook` judges the call in a process of its own. Either way the result is what
// that hook would print: { status, stdout, stderr, error }.
const GUARD_URL = __GUARD_URL__;

async function askGuard(payload) {
  if (GUARD_URL !== null) {
    try {
      const reply = await fetch(GUARD_URL, {
        method: "POST",
        body: payload,
        headers: { "content-type": "application/json", "x-lockyard-pid": String(process.pid) },
        signal: AbortSignal.timeout(60000),
      });
      const answer = commandAnswer(Buffer.from(await reply.arrayBuffer()));
      if (reply.status === 200 && answer !== null) return answer;
    } catch {
      // nobody listens, or the guard went away mid-call: judged below instead
    }
  }
  return spawnSync(COMMAND, HOOK_ARGS, { input: payload, encoding: "utf8" });
}

// A guard's answer for a command hook: "<exit status> <stdout length>\n", stdout, stderr.
function commandAnswer(body) {
  const newline = body.indexOf(10);
  const fields = newline < 0 ? [] : body.subarray(0, newline).toString("latin1").split(" ");
  if (fields.length !== 2 || !fields.every((field) => /^[0-9]+$/.test(field))) return null;
  const [status, length] = fields.map(Number);
  const rest = body.subarray(newline + 1);
  if (length > rest.length) return null;
  const stdout = rest.subarray(0, length).toString("utf8");
  return { status, stdout, stderr: rest.subarray(length).toString("utf8"), error: undefined };
}
