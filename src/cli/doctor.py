"""`lockyard doctor`: check a repository's set-up as a person would, and say what to fix.

Each check is one finding: ok, a warning (works, but not as you may think), or a problem
(something will not be enforced or will not start); every warning and problem carries the
command or step that fixes it. Read-only: it runs each configured CLI's and lockyard
command's `--version`, reads the configuration files and the lock store, and changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from ..core.extras import POSTGRES, SDK, installed
from ..infra.agentcli.config_files import ConfigFileError, Plan
from ..infra.agentcli.setups import (
    SERVER_KEY,
    SETUPS,
    CliSetup,
    CodexSetup,
    Invocation,
    JsonServerSetup,
)
from ..infra.crossproc.leader_file import current_leader
from ..infra.lockstore import LockBackend, StoreSnapshot, default_lock_dir_path
from ._errors import EXIT_CODES_HELP, CliError, ExitCode, reports_errors
from ._format import print_json, quiet_library_logs
from ._lockdir import LOCK_DIR_HELP, LockDirNotCreatedError, location_source, open_store
from ._options import backend_option, flag, lock_dir_option
from .init import default_command
from .policy import idle_limit_text

HELP = """Check this repository's lockyard set-up and say what to fix: each configured
agent CLI (its version, whether it will run the hook, the lockyard command its
configuration starts), the lock directory or database, and stale locks.

Read-only. Exit 0 when nothing needs fixing (warnings allowed), 10 when something does.
"""

Status = Literal["ok", "warning", "problem"]
MARKS: dict[Status, str] = {"ok": "ok", "warning": "warning", "problem": "PROBLEM"}

VERIFIED_VERSIONS: dict[str, tuple[int, ...]] = {
    "claude-code": (2, 1, 330),
    "codex": (0, 169, 0),
    "gemini": (0, 61, 0),
    "opencode": (1, 18, 33),
    "copilot": (1, 0, 102),
    "pi": (0, 73, 1),
    "kilo": (7, 7, 7),
    "qwen": (0, 24, 4),
    "droid": (0, 215, 0),
}
"""The version each CLI's hook format was verified with (docs/agent-clis.md); older ones may
not know the hook lockyard writes for it."""


def _our_version() -> str:
    from importlib.metadata import version

    return version("lockyard")


VERSION_TIMEOUT = 30.0
"""Seconds a `--version` may take (a node CLI's first start on a loaded machine is slow)."""


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str | None = None


def register(app: typer.Typer) -> None:
    app.command("doctor", help=HELP, epilog=EXIT_CODES_HELP)(doctor)


@reports_errors
def doctor(
    repo: Annotated[
        Path | None,
        typer.Option("--repo", help="The repository to check (default: the current one)."),
    ] = None,
    lock_dir: Annotated[Path | None, lock_dir_option(LOCK_DIR_HELP)] = None,
    backend: Annotated[str | None, backend_option()] = None,
    json_output: Annotated[
        bool, flag("--json", help="Print one JSON document: ok, and each check's finding.")
    ] = False,
) -> None:
    quiet_library_logs()
    root = _repository(repo)
    findings = [
        _lockyard_itself(),
        *_store_findings(lock_dir, backend),
        *_cli_findings(root),
    ]
    healthy = all(f.status != "problem" for f in findings)
    if json_output:
        checks = [dataclasses.asdict(f) for f in findings]
        print_json({"ok": healthy, "repo": str(root), "checks": checks})
    else:
        _render(root, findings)
    if not healthy:
        raise typer.Exit(int(ExitCode.PROBLEMS_FOUND))


def _repository(repo: Path | None) -> Path:
    start = (repo or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    raise CliError(
        f"{start} is not inside a git repository",
        ExitCode.USAGE,
        "run lockyard doctor in the repository you set up (or pass --repo)",
    )


def _lockyard_itself() -> Finding:
    extras = [e.name for e in (SDK, POSTGRES) if installed(e)]
    with_extras = f"with {', '.join(extras)}" if extras else "plain (no extras)"
    return Finding("lockyard", "ok", f"lockyard {_our_version()} at {sys.prefix}, {with_extras}")


# ----- the lock store ---------------------------------------------------------------------


def _store_findings(lock_dir: Path | None, backend: str | None) -> list[Finding]:
    source = location_source(lock_dir, backend)
    try:
        store = open_store(lock_dir, backend, read_only=True)
    except LockDirNotCreatedError as missing:
        return [
            Finding(
                "lock store",
                "ok",
                f"{missing.path} ({source}) does not exist yet: the first session creates it",
            )
        ]
    except CliError as error:
        return [Finding("lock store", "problem", error.message, error.hint)]
    try:
        snapshot = store.snapshot()
    except Exception as error:  # reachable once, not now: say what the store said
        return [Finding("lock store", "problem", f"{store.location}: {error}", None)]
    findings = [_access(store, source), _leader(store, snapshot)]
    dead = [info for info in snapshot.locks if info.liveness == "dead"]
    if dead:
        names = ", ".join(
            f"{info.lock_path} ({info.holder.agent_id})" for info in dead if info.holder
        )
        findings.append(
            Finding(
                "stale locks",
                "warning",
                f"{len(dead)} lock(s) held by processes that are gone: {names}",
                "lockyard clean (releases exactly these; a session that asks for one "
                "reclaims it too)",
            )
        )
    else:
        held = len(snapshot.locks)
        findings.append(Finding("stale locks", "ok", f"none ({held} lock(s) held or awaited)"))
    findings.append(Finding("idle limit", "ok", idle_limit_text(store.idle_limit())))
    return findings


def _leader(store: LockBackend, snapshot: StoreSnapshot) -> Finding:
    """Who finds and breaks deadlocks across this lock directory's processes."""
    check = "deadlock detection"
    directory = getattr(store, "lock_dir", None)
    if directory is None:
        return Finding(check, "ok", "PostgreSQL: the servers elect a leader on the database")
    leader = current_leader(directory)
    if leader is not None:
        return Finding(check, "ok", f"led by {leader.describe()}")
    live = sorted(
        {
            info.holder.agent_id
            for info in snapshot.locks
            if info.holder and info.liveness == "alive"
        }
    )
    if not live:
        return Finding(check, "ok", "nobody leads now: the first session's lockyard serve will")
    return Finding(
        check,
        "warning",
        f"locks are held ({', '.join(live)}) but no lockyard process leads deadlock detection: "
        "their holders are not lockyard serve sessions or coordinators",
        "run lockyard monitor beside them (or give them LockCoordinator(cross_process=True))",
    )


def _access(store: LockBackend, source: str) -> Finding:
    directory = getattr(store, "lock_dir", None)
    if directory is None:
        return Finding("lock store", "ok", f"{store.location} ({source}): reachable")
    path = Path(directory)
    info = path.stat()
    if info.st_uid != os.getuid():
        return Finding(
            "lock store",
            "problem",
            f"{path} belongs to uid {info.st_uid}, not to you",
            "point LOCKYARD_LOCK_DIR (or --lock-dir) at a directory of your own",
        )
    if not os.access(path, os.W_OK | os.X_OK):
        return Finding(
            "lock store",
            "problem",
            f"{path} is not writable by you: no session can lock there",
            f"chmod u+rwx {path}",
        )
    if info.st_mode & 0o022:
        return Finding(
            "lock store",
            "warning",
            f"{path} is writable by others (mode {info.st_mode & 0o777:o})",
            f"chmod go-w {path}",
        )
    return Finding("lock store", "ok", f"{path} ({source}): yours, writable")


# ----- the agent CLIs ---------------------------------------------------------------------


def _cli_findings(root: Path) -> list[Finding]:
    plan = Plan(root, outside_ok=True)  # only read: the user's own files may be elsewhere
    configured: list[CliSetup] = []
    for setup in SETUPS.values():
        try:
            if setup.installed(plan):
                configured.append(setup)
        except ConfigFileError as error:
            configured_name = setup.display
            return [Finding(configured_name, "problem", str(error), None)]
    if not configured:
        return [
            Finding(
                "agent CLIs",
                "warning",
                f"no agent CLI is set up for lockyard in {root}",
                "lockyard init (finds the CLIs you use; name them to choose)",
            )
        ]
    findings: list[Finding] = []
    for setup in configured:
        how = configured_invocation(setup, plan)
        findings.append(_intact(setup, root, how))
        findings.append(_command(setup, how))
        findings.append(_cli_version(setup))
        findings.extend(_runs_hooks(setup, root))
    return findings


def configured_invocation(setup: CliSetup, plan: Plan) -> Invocation | None:
    """How the configuration starts lockyard's server (None: not readable here)."""
    if isinstance(setup, CodexSetup):
        try:
            document = tomllib.loads(plan.text(setup.server_file) or "")
        except tomllib.TOMLDecodeError:
            return None
        entry = document.get("mcp_servers", {}).get(SERVER_KEY, {})
        command, args = entry.get("command"), entry.get("args")
        if not isinstance(command, str) or not isinstance(args, list):
            return None
        found = Invocation.from_serve_argv([command, *map(str, args)], setup.name)
    elif isinstance(setup, JsonServerSetup):
        servers = plan.read_json(setup.server_file, comments=setup.comments)
        found = setup.invocation_of(servers.get((*setup.server_path, SERVER_KEY)))
    else:
        return None
    # The HTTP hook's URL names the guard of the lock directory the commands will use.
    return (
        None
        if found is None
        else dataclasses.replace(found, default_lock_dir=default_lock_dir_path())
    )


def _intact(setup: CliSetup, root: Path, how: Invocation | None) -> Finding:
    """Whether every entry `lockyard init` wrote is still there, unchanged: `init` again with
    the same command would change nothing."""
    check = f"{setup.display}: configuration"
    fresh = Plan(root, outside_ok=True)
    try:
        setup.install(
            fresh, how or Invocation(default_command(), default_lock_dir=default_lock_dir_path())
        )
    except ConfigFileError as error:
        return Finding(check, "problem", str(error), None)
    changed = [change.name(root) for change in fresh.changes()]
    if changed:
        return Finding(
            check,
            "problem",
            f"what lockyard init wrote is missing or changed in {', '.join(changed)} "
            "(another tool may have rewritten it): that part is not enforced",
            f"lockyard init {setup.name} (add --dry-run to see what it puts back)",
        )
    if not setup.guarded:
        return Finding(
            check, "ok", "the lock tools are configured as init wrote them (no guard: MCP only)"
        )
    return Finding(check, "ok", "the lock tools and the guard are configured as init wrote them")


def _command(setup: CliSetup, how: Invocation | None) -> Finding:
    check = f"{setup.display}: lockyard command"
    if how is None:
        return Finding(check, "ok", "started from lockyard's own file (not read here)")
    found = shutil.which(how.command)
    if found is None:
        return Finding(
            check,
            "problem",
            f"the configuration starts {how.command!r}, which "
            + ("is not on PATH" if os.sep not in how.command else "does not exist"),
            f"lockyard init {setup.name} --command {sys.prefix}/bin/lockyard, or install "
            "lockyard as a tool (README: Install the lockyard command)",
        )
    version = _version_of([found, "--version"])
    if version is None:
        return Finding(check, "problem", f"{found} --version fails", "reinstall lockyard")
    if version != _our_version():
        return Finding(
            check,
            "warning",
            f"{found} is lockyard {version}, this one is {_our_version()}",
            "reinstall the tool (python3 scripts/uv tool install --reinstall .)",
        )
    return Finding(check, "ok", f"{found} (lockyard {version})")


def _cli_version(setup: CliSetup) -> Finding:
    check = f"{setup.display}: version"
    found = setup.found_on_path()
    if found is None:
        return Finding(
            check,
            "warning",
            f"{' or '.join(setup.executables) or setup.name} is not on PATH here",
            f"install {setup.display}, or run doctor where its sessions run",
        )
    text = _version_of([found, "--version"])
    numbers = _numbers(text or "")
    verified = VERIFIED_VERSIONS.get(setup.name)
    if numbers is None:
        return Finding(check, "warning", f"{found} --version says nothing readable", None)
    shown = ".".join(map(str, numbers))
    if verified is not None and numbers < verified:
        wanted = ".".join(map(str, verified))
        return Finding(
            check,
            "warning",
            f"{setup.display} {shown} is older than {wanted}, the version lockyard's hook "
            "for it was verified with: it may not run the hook",
            f"update {setup.display} to {wanted} or later",
        )
    return Finding(check, "ok", f"{setup.display} {shown} ({found})")


def _runs_hooks(setup: CliSetup, root: Path) -> list[Finding]:
    """What the CLI itself requires before it runs a project's hooks."""
    if setup.name == "claude-code":
        return _claude_code_hooks(root)
    if setup.name == "codex":
        return _codex_hooks(root)
    return []


def _claude_code_hooks(root: Path) -> list[Finding]:
    check = "Claude Code: hooks run"
    home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home())
    findings: list[Finding] = []
    for settings in (
        root / ".claude" / "settings.local.json",
        Path.home() / ".claude" / "settings.json",
        Path("/etc/claude-code/managed-settings.json"),
    ):
        data = _json_file(settings)
        if data.get("disableAllHooks") is True:
            findings.append(
                Finding(
                    check,
                    "problem",
                    f"{settings} sets disableAllHooks: no write is guarded",
                    f"remove disableAllHooks from {settings}",
                )
            )
        if data.get("allowManagedHooksOnly") is True:
            findings.append(
                Finding(
                    check,
                    "problem",
                    f"{settings} sets allowManagedHooksOnly: the project's hook is ignored",
                    "ask whoever manages that file to add lockyard's hook there",
                )
            )
    state = _json_file(home / ".claude.json")
    project = state.get("projects", {}).get(str(root), {})
    if not (isinstance(project, dict) and project.get("hasTrustDialogAccepted") is True):
        findings.append(
            Finding(
                check,
                "warning",
                f"{root} is not a trusted workspace for Claude Code yet: until it is, Claude "
                "Code ignores .claude/settings.json (the hook and the allowed lock tools)",
                f"run claude in {root} once and accept the trust dialog",
            )
        )
    return findings or [Finding(check, "ok", "trusted workspace; no setting turns hooks off")]


def _codex_hooks(root: Path) -> list[Finding]:
    check = "Codex CLI: hooks run"
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    try:
        config = tomllib.loads((home / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        config = {}
    project = config.get("projects", {}).get(str(root), {})
    if not (isinstance(project, dict) and project.get("trust_level") == "trusted"):
        return [
            Finding(
                check,
                "problem",
                f"{root} is not a trusted project for Codex: it reads no .codex/ there, so "
                "neither the lock tools nor the hook are loaded",
                f"run codex in {root} once and trust the folder",
            )
        ]
    return [
        Finding(
            check,
            "warning",
            "Codex runs a project's hooks only once a person has reviewed and trusted them "
            "(not checked here)",
            "in codex, review and trust .codex/hooks.json when it asks",
        )
    ]


# ----- helpers ----------------------------------------------------------------------------


def _version_of(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    words = done.stdout.split()
    match = next((w for w in words if re.fullmatch(r"v?\d+(\.\d+)+\S*", w)), None)
    return match.lstrip("v") if match else None


def _numbers(version: str) -> tuple[int, ...] | None:
    found = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    return None if found is None else tuple(int(n) for n in found.groups() if n is not None)


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _render(root: Path, findings: list[Finding]) -> None:
    print(_wrapped(f"lockyard doctor: {root}", "", " " * 4))
    for finding in findings:
        head = f"{MARKS[finding.status]:>7}  {finding.check}: "
        print(_wrapped(finding.detail, head, " " * 9))
        if finding.fix and finding.status != "ok":
            print(_wrapped(finding.fix, " " * 9 + "fix: ", " " * 14))
    problems = sum(f.status == "problem" for f in findings)
    warnings = sum(f.status == "warning" for f in findings)
    if problems:
        print(f"{problems} problem(s) to fix, {warnings} warning(s).")
    elif warnings:
        print(f"Nothing to fix; {warnings} warning(s) to read.")
    else:
        print("Everything checked is in order.")


def _wrapped(text: str, first: str, rest: str) -> str:
    """`text` at 80 columns; paths break at their slashes' ends, never at a hyphen."""
    return "\n".join(
        textwrap.wrap(
            text, 80, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
        )
    )
