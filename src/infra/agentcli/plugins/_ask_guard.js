// The guard: the sessions' own `lockyard serve` processes answer it on 127.0.0.1 in about a
// millisecond. When none answers (none runs yet, or another lock directory's holds the port),
// `lockyard hook` judges the call in a process of its own. Either way the result is what
// that hook would print: { status, stdout, stderr, error }. A guard that listens but does
// not answer by the deadline refuses the call, and so does a hook process that runs past the
// timeout: the CLI itself would wait for this plugin for ever.
const GUARD_URL = __GUARD_URL__;
const GUARD_DEADLINE_MS = __GUARD_DEADLINE_MS__;
const HOOK_TIMEOUT_MS = __HOOK_TIMEOUT_MS__;
const LATE_REASON = __LATE_REASON__;

async function askGuard(payload) {
  if (GUARD_URL !== null) {
    try {
      const reply = await fetch(GUARD_URL, {
        method: "POST",
        body: payload,
        headers: { "content-type": "application/json", "x-lockyard-pid": String(process.pid) },
        signal: AbortSignal.timeout(GUARD_DEADLINE_MS),
      });
      const answer = commandAnswer(Buffer.from(await reply.arrayBuffer()));
      if (reply.status === 200 && answer !== null) return answer;
    } catch (error) {
      if (error?.name === "TimeoutError") {
        return { status: 2, stdout: "", stderr: LATE_REASON };
      }
      // nobody listens, or the guard went away mid-call: judged below instead
    }
  }
  const done = spawnSync(COMMAND, HOOK_ARGS, {
    input: payload,
    encoding: "utf8",
    timeout: HOOK_TIMEOUT_MS,
    killSignal: "SIGKILL",
  });
  if (done.error?.code === "ETIMEDOUT") return { status: 2, stdout: "", stderr: LATE_REASON };
  return done;
}

// Why the guard refused the call, or null: exit 2 with a reason on stderr is a refusal (as
// every CLI reads it); any other failure means the guard did not run, and refuses too.
function refusal(done) {
  if (!done.error && done.status === 2 && done.stderr.trim()) return done.stderr.trim();
  if (done.error || done.status !== 0) {
    const why = done.error ?? done.stderr;
    return `lockyard's guard did not run (${why}), so this call is refused`;
  }
  const answer = done.stdout.trim() ? JSON.parse(done.stdout) : {};
  return answer.decision === "deny" ? answer.reason : null;
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
