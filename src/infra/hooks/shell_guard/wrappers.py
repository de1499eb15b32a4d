"""Commands that run another command: judged through, or undetermined.

A wrapper runs the command it is given (`setsid rm f`, `taskset -c 0 rm f`, `strace -o log rm
f`, `script -qc 'rm f' /dev/null`, `watch 'rm f'`): the guard judges that command as if it
ran alone, in the directory and with the input the wrapper gives it, plus the files the
wrapper itself writes (`strace -o log`, `script`'s typescript, `time -o`). A wrapper that
changes what paths mean (`chroot DIR`, `unshare --root`, `nsenter --mount`) or where the
command runs (`su -`, `ssh host`, `systemd-run`, `tmux new-session`) makes its writes
undetermined, as far as they depend on it.

A command the guard knows nothing about may take a command to run too: `ORDINARY` lists the
common programs that never do; for any other, an argument that names a command that writes
(`foo --flag rm notes.txt`) or a text argument that parses as one (`foo 'echo x > f'`) makes
it undetermined (see `targets._Walker.unknown_command`).
"""

from __future__ import annotations

import os
from typing import Final

from .effects import Arg, Effects, read_options
from .utilities import Place, Rule, shell_program


def _wrapper(
    values: str = "",
    long_values: frozenset[str] = frozenset(),
    *,
    optional: str = "",
    before: int = 0,
    writes: tuple[str, ...] = (),
) -> Rule:
    """A wrapper `NAME [OPTIONS] [N operands] COMMAND...`: COMMAND is judged, and the values
    of the options in `writes` are files it writes."""

    def rule(args: list[Arg], place: Place) -> Effects:
        options = read_options(
            args,
            short_values=values,
            long_values=long_values,
            optional_short=optional,
            stop_at_first_operand=True,
        )
        effects = Effects()
        _written(options.values(*writes), effects)
        rest = options.operands[before:]
        if rest:
            effects.commands.append(rest)
        return effects

    return rule


def _written(values: list[Arg], effects: Effects) -> None:
    for value in values:
        if value is None:
            effects.unknown.append("it writes a file only known when it runs")
        elif value.startswith(("|", "!")):
            effects.scripts.append(value[1:])  # strace -o '|cmd': its output piped to cmd
        elif value:
            effects.files.append(value)


def _unknown(reason: str) -> Effects:
    return Effects(unknown=[reason])


def _isolated(command: list[Arg], why: str) -> Effects:
    """A command run where paths mean something else: undetermined if it writes at all (no
    command: a shell, reading its input)."""
    return Effects(isolated=[(command or ["sh"], why)])


_CONTAINER_VALUES: Final = frozenset(
    {"-v", "--volume", "-e", "--env", "-w", "--workdir", "--name", "-p", "--publish",
     "--network", "--net", "-u", "--user", "--mount", "--env-file", "-l", "--label",
     "--platform", "--cpus", "-m", "--memory", "--hostname", "-h", "--add-host", "--cap-add",
     "--cap-drop", "--device", "--dns", "--ipc", "--pid", "--restart", "--runtime",
     "--security-opt", "--shm-size", "--stop-signal", "--tmpfs", "--ulimit", "--userns",
     "--volumes-from", "--log-driver", "--log-opt", "--pull", "--gpus", "--group-add",
     "--detach-keys", "--cidfile", "--health-cmd", "--init-path", "--label-file"}
)  # fmt: skip


def container(args: list[Arg], place: Place) -> Effects:
    """`docker run IMAGE COMMAND...`, `docker exec CONTAINER COMMAND...` (podman too): the
    command's paths are the container's, mapped onto the repository by mounts the guard does
    not follow."""
    words = list(args)
    if words[:1] == ["compose"] or words[:1] == ["container"]:
        words = words[1:]
    if not words or words[0] not in ("run", "exec", "create"):
        return Effects()
    action, rest = words[0], words[1:]
    index = 0
    entrypoint: list[Arg] = []
    while index < len(rest):
        arg = rest[index]
        if arg is None or not arg.startswith("-"):
            break
        if arg == "--entrypoint" and index + 1 < len(rest):
            entrypoint = [rest[index + 1]]
        index += 2 if arg in _CONTAINER_VALUES or arg == "--entrypoint" else 1
    command = [*entrypoint, *rest[index + 1 :]]
    if not command:
        return Effects()  # the image's own command: a program, like any other
    return Effects(isolated=[(command, f"`{action}` runs it in a container, on mounted paths")])


def setsid(args: list[Arg], place: Place) -> Effects:
    return _wrapper()(args, place)


def taskset(args: list[Arg], place: Place) -> Effects:
    """`taskset [-c] MASK COMMAND...`; `taskset -p` works on a running process."""
    options = read_options(args, stop_at_first_operand=True)
    if options.has("-p", "--pid"):
        return Effects()
    return _wrapper(before=1)(args, place)


_STRACE_VALUES: Final = "abeEIoOpPsSuUX"
_STRACE_LONG: Final = frozenset(
    {"--output", "--trace", "--signal", "--status", "--attach", "--string-limit", "--user",
     "--env", "--trace-path", "--summary-sort-by", "--columns", "--decode-fds", "--quiet"}
)  # fmt: skip


def strace(args: list[Arg], place: Place) -> Effects:
    """`strace [-o FILE] COMMAND...`: the command, and the trace file (with `-ff`, one per
    process: FILE.PID, names only known when it runs)."""
    options = read_options(
        args, short_values=_STRACE_VALUES, long_values=_STRACE_LONG, stop_at_first_operand=True
    )
    effects = Effects()
    outputs = options.values("-o", "--output")
    if len(options.flags.get("-f", [])) > 1:  # -ff
        for output in outputs:
            if output is not None and not output.startswith(("|", "!")):
                effects.unlisted.append((output, "`strace -ff -o` writes one file per process"))
        outputs = []
    _written(outputs, effects)
    if options.operands:
        effects.commands.append(options.operands)
    return effects


def ltrace(args: list[Arg], place: Place) -> Effects:
    return _wrapper("aAeEnoOpsuwxXFlL", frozenset({"--output"}), writes=("-o", "--output"))(
        args, place
    )


def script(args: list[Arg], place: Place) -> Effects:
    """`script [-c CMD] [FILE]`: runs CMD (or a shell reading the input) and writes FILE
    (`typescript` when none is named) and its log files."""
    options = read_options(
        args,
        short_values="cEIOBTm",
        optional_short="t",
        long_values=frozenset(
            {
                "--command",
                "--echo",
                "--log-in",
                "--log-out",
                "--log-io",
                "--log-timing",
                "--logging-format",
                "--output-limit",
            }
        ),
    )
    effects = Effects()
    _written(options.operands[:1] or ["typescript"], effects)
    logs = options.values("-O", "--log-out", "-I", "--log-in", "-B", "--log-io", "-T")
    logs += options.values("--log-timing") + [t for t in options.values("-t") if t]
    _written(logs, effects)
    commands = options.values("-c", "--command")
    if not commands:
        effects.merge(shell_program("script", place.stdin))
    for text in commands:
        if text is None:
            effects.unknown.append("`script -c` runs a command only known when it runs")
        else:
            effects.scripts.append(text)
    return effects


_UNSHARE_VALUES: Final = "SGRw"
_UNSHARE_LONG: Final = frozenset(
    {"--map-user", "--map-users", "--map-group", "--map-groups", "--propagation",
     "--setgroups", "--setuid", "--setgid", "--root", "--wd", "--load-interp"}
)  # fmt: skip


def unshare(args: list[Arg], place: Place) -> Effects:
    """`unshare [OPTIONS] [COMMAND...]` (no command: a shell reading the input); `--root`
    changes what every path means."""
    options = read_options(
        args, short_values=_UNSHARE_VALUES, long_values=_UNSHARE_LONG, stop_at_first_operand=True
    )
    roots = options.values("-R", "--root")
    if any(root is None or os.path.normpath(root) != "/" for root in roots):
        return _isolated(options.operands, "`unshare --root` runs it in another root directory")
    effects = Effects()
    directories = options.values("-w", "--wd")
    if directories:
        if directories[-1] is None:
            return _unknown("`unshare --wd` runs in a directory only known when it runs")
        effects.chdir = directories[-1]
    if options.operands:
        effects.commands.append(options.operands)
    else:
        effects.merge(shell_program("unshare", place.stdin))
    return effects


def chroot(args: list[Arg], place: Place) -> Effects:
    """`chroot NEWROOT [COMMAND...]`: every path is taken inside NEWROOT, from its root."""
    options = read_options(
        args, long_values=frozenset({"--userspec", "--groups"}), stop_at_first_operand=True
    )
    if not options.operands:
        return Effects()
    root = options.operands[0]
    if root is None or os.path.normpath(root) != "/":
        return _isolated(options.operands[1:], "`chroot` runs it in another root directory")
    effects = Effects(chdir="/" if not options.has("--skip-chdir") else None)
    rest = options.operands[1:]
    if rest:
        effects.commands.append(rest)
    else:
        effects.merge(shell_program("chroot", place.stdin))
    return effects


def coproc(args: list[Arg], place: Place) -> Effects:
    """`coproc [NAME] COMMAND`: the grammar leaves a compound command's braces as words."""
    rest = list(args)
    if len(rest) > 1 and rest[1] in ("{", "("):
        rest = rest[1:]
    while rest and rest[0] in ("{", "("):
        rest = rest[1:]
    return Effects(commands=[rest]) if rest else Effects()


def nsenter(args: list[Arg], place: Place) -> Effects:
    """`nsenter -t PID [namespaces] COMMAND`: entering a mount namespace (or its root or
    directory) changes what paths mean."""
    options = read_options(
        args,
        short_values="tSG",
        optional_short="muinpUCTrw",
        long_values=frozenset({"--target", "--setuid", "--setgid"}),
        stop_at_first_operand=True,
    )
    if options.has("-m", "--mount", "-a", "--all", "-r", "--root", "-w", "--wd"):
        return _isolated(options.operands, "`nsenter` runs it in another process's file system")
    return Effects(commands=[options.operands]) if options.operands else Effects()


def su(args: list[Arg], place: Place) -> Effects:
    """`su [-] [USER] -c TEXT`, `runuser -u USER COMMAND...`: a login (`-`, `-l`) starts in
    that user's home directory."""
    options = read_options(
        args,
        short_values="cgGsuw",
        long_values=frozenset(
            {
                "--command",
                "--session-command",
                "--group",
                "--supp-group",
                "--shell",
                "--user",
                "--whitelist-environment",
            }
        ),
    )
    login = options.has("-l", "--login") or "-" in options.operands
    users = options.values("-u", "--user")
    effects = Effects(lost_directory=login)
    if users:  # runuser -u USER COMMAND...
        rest = options.operands
        if rest:
            effects.commands.append(rest)
        return effects
    texts = options.values("-c", "--command", "--session-command")
    for text in texts:
        if text is None:
            effects.unknown.append("`su -c` runs a command only known when it runs")
        else:
            effects.scripts.append(text)
    if not texts:
        effects.merge(shell_program("su", place.stdin))
    return effects


def sg(args: list[Arg], place: Place) -> Effects:
    """`sg GROUP [-c] TEXT`."""
    rest = [a for a in args[1:] if a != "-c"]
    if not rest:
        return Effects()
    if any(a is None for a in rest):
        return _unknown("`sg` runs a command only known when it runs")
    return Effects(scripts=[" ".join(a for a in rest if a is not None)])


def watch(args: list[Arg], place: Place) -> Effects:
    """`watch [-n S] COMMAND...`: the words, joined, run with `sh -c` (`-x`: as a command)."""
    options = read_options(
        args,
        short_values="nq",
        optional_short="d",
        long_values=frozenset({"--interval", "--equexit"}),
        stop_at_first_operand=True,
    )
    rest = options.operands
    if not rest:
        return Effects()
    if options.has("-x", "--exec"):
        return Effects(commands=[rest])
    if any(a is None for a in rest):
        return _unknown("`watch` runs a command only known when it runs")
    return Effects(scripts=[" ".join(a for a in rest if a is not None)])


def chrt(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="TPD", stop_at_first_operand=True)
    if options.has("-p", "--pid"):
        return Effects()
    return _wrapper("TPD", before=1)(args, place)


def systemd_run(args: list[Arg], place: Place) -> Effects:
    """`systemd-run COMMAND`: a service starts in `/` unless `--same-dir`,
    `--working-directory` or `--scope` (which runs beside the caller)."""
    options = read_options(
        args,
        short_values="upEMH",
        long_values=frozenset(
            {
                "--unit",
                "--property",
                "--setenv",
                "--description",
                "--slice",
                "--uid",
                "--gid",
                "--nice",
                "--working-directory",
                "--machine",
                "--host",
                "--on-active",
                "--on-boot",
                "--on-startup",
                "--on-unit-active",
                "--on-unit-inactive",
                "--on-calendar",
                "--timer-property",
                "--path-property",
                "--socket-property",
                "--service-type",
                "--expand-environment",
            }
        ),
        stop_at_first_operand=True,
    )
    effects = Effects()
    directories = options.values("--working-directory")
    if directories:
        if directories[-1] is None:
            return _unknown("`systemd-run` runs in a directory only known when it runs")
        effects.chdir = directories[-1]
    elif not options.has("--scope", "-d", "--same-dir"):
        effects.chdir = "/"
    if options.operands:
        effects.commands.append(options.operands)
    return effects


def daemonize(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="ceEoplu", stop_at_first_operand=True)
    effects = Effects()
    _written(options.values("-e", "-o", "-p", "-l"), effects)
    chdir = options.values("-c")
    effects.chdir = "/" if not chdir else chdir[-1]
    if chdir and chdir[-1] is None:
        return _unknown("`daemonize -c` runs in a directory only known when it runs")
    if options.operands:
        effects.commands.append(options.operands)
    return effects


_TMUX_RUNS: Final = frozenset(
    {"new-session", "new", "new-window", "neww", "split-window", "splitw", "respawn-pane",
     "respawnp", "respawn-window", "respawnw", "run-shell", "run", "if-shell", "if",
     "display-popup", "popup", "pipe-pane", "pipep", "send-keys", "send"}
)  # fmt: skip


def tmux(args: list[Arg], place: Place) -> Effects:
    """tmux commands that run shell text (`new-session 'cmd'`, `send-keys 'cmd' Enter`,
    `run-shell`...) run it in the session's directory (`-c DIR` when given)."""
    options = read_options(args, short_values="LSfcT", stop_at_first_operand=True)
    effects = Effects(lost_directory=True)
    for text in options.values("-c"):  # tmux -c TEXT: run TEXT with the default shell
        effects.scripts.append(text or "")
    if not options.operands or options.operands[0] not in _TMUX_RUNS:
        return effects if effects.scripts else Effects()
    inner = read_options(options.operands[1:], short_values="cefnstxyNF")
    directories = inner.values("-c")
    if directories and directories[-1] is not None:
        effects.lost_directory = False
        effects.chdir = directories[-1]
    words = [w for w in inner.operands if w not in ("Enter", "C-m")]
    if any(w is None for w in words):
        return _unknown("tmux runs a command only known when it runs")
    if words:
        effects.scripts.append(" ".join(w for w in words if w is not None))
    return effects


def screen(args: list[Arg], place: Place) -> Effects:
    """`screen -dm COMMAND...`, `screen -X stuff TEXT` (typed into a window)."""
    options = read_options(args, short_values="SpcehRsTtX", stop_at_first_operand=True)
    effects = Effects(lost_directory=options.has("-X"))
    if options.has("-X"):
        words = options.values("-X") + options.operands
        if any(w is None for w in words):
            return _unknown("screen runs a command only known when it runs")
        effects.scripts.append(" ".join(w for w in words[1:] if w is not None))
    elif options.operands:
        effects.commands.append(options.operands)
    return effects


def ssh(args: list[Arg], place: Place) -> Effects:
    """`ssh HOST COMMAND...`: the words run, joined, by the remote shell in the remote home
    (possibly this machine); `-o ProxyCommand=...`/`LocalCommand` run here."""
    options = read_options(args, short_values="BbcDEeFIiJLlmOopQRSWw", stop_at_first_operand=True)
    effects = Effects()
    for value in options.values("-o"):
        key, _, text = (value or "").partition("=")
        if value is None or (key.lower() in ("proxycommand", "localcommand") and text):
            effects.merge(
                Effects(scripts=[text]) if value else _unknown("ssh -o only known when it runs")
            )
    if options.has("-F"):
        effects.unknown.append("`ssh -F` reads a configuration that may run local commands")
    words = options.operands[1:]
    if words:
        if any(w is None for w in words):
            return _unknown("`ssh` runs a command only known when it runs")
        effects.scripts.append(" ".join(w for w in words if w is not None))
        effects.lost_directory = True  # the remote shell starts in the remote home
    return effects


_PARALLEL_SEPARATORS: Final = frozenset({":::", "::::", ":::+", "::::+"})


def parallel(args: list[Arg], place: Place) -> Effects:
    """GNU `parallel COMMAND ::: ARGS`: the command with arguments only known when it runs
    (`{}` replaced, or appended)."""
    options = read_options(
        args,
        short_values="jSadnNLlIEXCsuU",
        long_values=frozenset({"--jobs", "--arg-file", "--delimiter", "--max-args"}),
        stop_at_first_operand=True,
    )
    words: list[Arg] = []
    for word in options.operands:
        if word in _PARALLEL_SEPARATORS:
            break
        words.append(word)
    if not words:
        return Effects()
    if len(words) == 1 and words[0] is not None and " " in words[0]:
        return Effects(scripts=[words[0].replace("{", "${__parallel_argument").replace("}", "}")])
    template = [None if w is not None and "{" in w else w for w in words]
    if template == words:
        template.append(None)
    return Effects(commands=[template])


def at(args: list[Arg], place: Place) -> Effects:
    """`at TIME` / `batch`: the shell text on the input runs later (`-f FILE`: a script)."""
    options = read_options(args, short_values="fqt")
    if options.has("-l", "-d", "-r", "-c"):
        return Effects()
    if options.has("-f"):
        return Effects()
    return shell_program("at", place.stdin)


def crontab(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="u")
    if options.has("-l", "-r", "-T"):
        return Effects()
    return _unknown(
        "`crontab` schedules commands the guard cannot judge: ask the operator to schedule them"
    )


def perf(args: list[Arg], place: Place) -> Effects:
    """`perf record [-o FILE] COMMAND` writes perf.data (or FILE); `perf stat`/`trace` run
    the command."""
    if not args or args[0] not in ("record", "stat", "trace", "mem", "c2c", "sched", "lock"):
        return Effects()
    options = read_options(
        args[1:],
        short_values="oeptFcCGIrmz",
        long_values=frozenset({"--output", "--event", "--pid", "--tid", "--call-graph"}),
        stop_at_first_operand=True,
    )
    effects = Effects()
    outputs = options.values("-o", "--output")
    if args[0] == "record" and not outputs:
        outputs = ["perf.data", "perf.data.old"]
    _written(outputs, effects)
    if options.operands:
        effects.commands.append(options.operands)
    return effects


def gnu_time(args: list[Arg], place: Place) -> Effects:
    """`time [-o FILE] [-a] COMMAND...` (GNU time; bash's keyword takes only `-p`)."""
    return _wrapper("fo", frozenset({"--format", "--output"}), writes=("-o", "--output"))(
        args, place
    )


def valgrind(args: list[Arg], place: Place) -> Effects:
    """`valgrind [--log-file=F ...] PROGRAM...`; a `%p` in a file name makes it unlisted."""
    effects = Effects()
    index = 0
    while index < len(args):
        arg = args[index]
        if arg is None or not arg.startswith("-"):
            break
        name, _, value = arg.partition("=")
        if name.endswith(("-file", "-out-file")) and value:
            if "%" in value:
                effects.unlisted.append(
                    (os.path.dirname(value) or ".", f"`{name}` names files by process")
                )
            else:
                effects.files.append(value)
        index += 1
    rest = args[index:]
    if rest:
        effects.commands.append(rest)
    return effects


def gdb(args: list[Arg], place: Place) -> Effects:
    if any(a in ("-ex", "-x", "--eval-command", "--command", "--args", "-batch", "--batch",
                 "-iex", "-ix") or (a or "").startswith(("--eval-command=", "--command="))
           for a in args):  # fmt: skip
        return _unknown("`gdb` runs commands and programs the guard does not follow")
    return Effects()


def expect(args: list[Arg], place: Place) -> Effects:
    if "-c" in args or not [a for a in args if a is None or not a.startswith("-")]:
        return _unknown("`expect` runs a script the guard does not read")
    return Effects()


def busybox(args: list[Arg], place: Place) -> Effects:
    """`busybox APPLET ARGS...`: the applet, judged as that command."""
    rest = [a for a in args if a is None or not a.startswith("--")]
    return Effects(commands=[rest]) if rest else Effects()


def sudo(args: list[Arg], place: Place) -> Effects:
    """`sudo [OPTIONS] COMMAND...`; `-D DIR` runs it there, `-i` in the target's home,
    `-s`/`-i` through a shell, `-e FILE` (sudoedit) edits FILE."""
    options = read_options(
        args,
        short_values="ugpCDhrtUTR",
        long_values=frozenset(
            {
                "--user",
                "--group",
                "--prompt",
                "--close-from",
                "--chdir",
                "--host",
                "--role",
                "--type",
                "--other-user",
                "--chroot",
                "--command-timeout",
            }
        ),
        stop_at_first_operand=True,
    )
    if options.has("-e", "--edit"):
        return _edit(options.operands)
    if options.has("-R", "--chroot"):
        return _unknown("`sudo --chroot` runs the command in another root directory")
    effects = Effects(lost_directory=options.has("-i", "--login"))
    directories = options.values("-D", "--chdir")
    if directories:
        if directories[-1] is None:
            return _unknown("`sudo -D` runs in a directory only known when it runs")
        effects.chdir = directories[-1]
    rest = options.operands
    if options.has("-s", "--shell", "-i", "--login"):
        if not rest:
            effects.merge(shell_program("sudo", place.stdin))
        elif any(w is None for w in rest):
            return _unknown("`sudo -s` runs a command only known when it runs")
        else:
            effects.scripts.append(" ".join(w for w in rest if w is not None))
        return effects
    if rest:
        effects.commands.append(rest)
    return effects


def sudoedit(args: list[Arg], place: Place) -> Effects:
    return _edit(read_options(args, short_values="ugpCDhrtUTR").operands)


def _edit(files: list[Arg]) -> Effects:
    effects = Effects()
    for name in files:
        if name is None:
            effects.unknown.append("`sudoedit` edits a file only known when it runs")
        else:
            effects.files.append(name)
    return effects


RULES: Final[dict[str, Rule]] = {
    "setsid": setsid,
    "taskset": taskset,
    "strace": strace,
    "ltrace": ltrace,
    "script": script,
    "unshare": unshare,
    "chroot": chroot,
    "coproc": coproc,
    "nsenter": nsenter,
    "su": su,
    "runuser": su,
    "sg": sg,
    "watch": watch,
    "chrt": chrt,
    "systemd-run": systemd_run,
    "daemonize": daemonize,
    "tmux": tmux,
    "screen": screen,
    "ssh": ssh,
    "parallel": parallel,
    "at": at,
    "batch": at,
    "crontab": crontab,
    "perf": perf,
    "time": gnu_time,
    "valgrind": valgrind,
    "gdb": gdb,
    "expect": expect,
    "busybox": busybox,
    "toybox": busybox,
    "sudo": sudo,
    "sudoedit": sudoedit,
    "cpulimit": _wrapper("lpe", frozenset({"--limit", "--pid", "--exe"})),
    "numactl": _wrapper("CNmipP"),
    "prlimit": _wrapper("p", frozenset({"--pid"}), optional="cdefilmnqrstuvxy"),
    "setpriv": _wrapper(),
    "faketime": _wrapper(before=1),
    "fakeroot": _wrapper("lisb", frozenset({"--lib", "--faked"}), writes=("-s",)),
    "catchsegv": _wrapper(),
    "eatmydata": _wrapper(),
    "unbuffer": _wrapper(),
    "rlwrap": _wrapper("acfHlpPsStw"),
    "xvfb-run": _wrapper(
        "nsfepw",
        frozenset(
            {
                "--server-num",
                "--server-args",
                "--auth-file",
                "--error-file",
                "--xauth-protocol",
                "--wait",
            }
        ),
    ),
    "dbus-run-session": _wrapper(),
    "dbus-launch": _wrapper(),
    "torsocks": _wrapper("uaPp"),
    "proxychains": _wrapper("f"),
    "proxychains4": _wrapper("f"),
    "trickle": _wrapper("dutlnw"),
    "firejail": _wrapper(),
    "nohup": _wrapper(),
    "doas": _wrapper("uC"),
    "pkexec": _wrapper("u", frozenset({"--user"})),
    "chpst": _wrapper("ugUenlmdofpc/"),
    "setuidgid": _wrapper(before=1),
    "tini": _wrapper("spgel"),
    "dumb-init": _wrapper("r"),
    "gosu": _wrapper(before=1),
    "su-exec": _wrapper(before=1),
    "caffeinate": _wrapper("tw"),
    "entr": _wrapper(),
    "linux32": _wrapper(),
    "linux64": _wrapper(),
    "setarch": _wrapper(before=1),
    "docker": container,
    "podman": container,
    "nerdctl": container,
    "bwrap": lambda args, place: _unknown(
        "`bwrap` runs a command in a sandbox with paths of its own"
    ),
}
"""Wrapper commands by name (`time` is GNU time: bash's keyword takes only `-p`)."""

ORDINARY: Final = frozenset(
    {
        # reading and printing
        "echo", "printf", "cat", "tac", "head", "tail", "less", "more", "grep", "egrep",
        "fgrep", "rg", "ag", "ack", "ls", "ll", "tree", "wc", "cut", "tr", "paste", "join",
        "fold", "fmt", "column", "nl", "od", "hexdump", "xxd", "base64", "base32", "md5sum",
        "sha1sum", "sha256sum", "sha512sum", "b2sum", "cksum", "diff", "cmp", "comm", "file",
        "stat", "du", "df", "which", "whereis", "type", "man", "info", "apropos", "whatis",
        "tldr", "test", "[", "[[", "true", "false", ":", "pwd", "date", "cal", "basename",
        "dirname", "realpath", "readlink", "jq", "xq", "expr", "bc", "dc", "seq", "yes",
        "sleep", "id", "whoami", "groups", "hostname", "uname", "uptime", "printenv",
        "locate", "fd", "fdfind", "tput", "clear", "reset", "history", "jobs", "wait",
        "fg", "bg", "disown", "kill", "pkill", "pgrep", "killall", "ps", "top", "htop", "free",
        "lsof", "ss", "netstat", "ip", "ping", "dig", "host", "nslookup", "env", "set",
        "shift", "exit", "return", "break", "continue", "hash", "help", "umask", "ulimit",
        "getconf", "locale", "strings", "nm", "objdump", "readelf", "ldd", "size",
        "lsblk", "mount", "findmnt", "vmstat", "iostat", "nproc", "lscpu", "getent",
        "sort", "uniq", "rev", "expand", "unexpand", "tsort", "factor", "numfmt",
        "look", "zcat", "bzcat", "xzcat", "zstdcat", "zgrep", "zless", "cloc", "tokei",
        "scc", "hyperfine", "bat", "batcat", "delta", "difft",
        "colordiff", "wdiff", "icdiff", "highlight", "pygmentize", "glow", "mdcat",
        # building, testing, checking (they write what they write: the commit guard's)
        "make", "cmake", "ninja", "meson", "bazel", "cargo", "rustc", "go", "gcc", "g++",
        "cc", "c++", "clang", "clang++", "ld", "javac", "java", "mvn", "gradle", "dotnet",
        "npm", "yarn", "bun", "deno", "tsc", "jest", "vitest", "mocha", "pytest", "tox",
        "nox", "mypy", "pyright", "pylint", "flake8", "bandit", "coverage", "pip", "pip3",
        "pipx", "conda", "mamba", "gem", "bundle", "rake", "composer", "php", "lua",
        "luajit", "Rscript", "julia", "swift", "swiftc", "kotlin", "kotlinc", "scala", "sbt",
        "stack", "cabal", "ghc", "mix", "elixir", "erl", "dart", "flutter", "zig", "nim",
        "ocaml", "dune", "lake", "terraform", "tflint", "helm", "shellcheck", "hadolint",
        "actionlint", "yamllint", "markdownlint", "codespell", "typos", "vale", "pre-commit",
        "lint-imports", "duplicates", "farm-studio", "issues",
        # services and tools that take text, not commands
        "gh", "glab", "hub", "curl", "wget", "http", "httpie", "openssl", "gpg", "ssh-keygen",
        "git-lfs", "psql", "mysql", "redis-cli", "mongosh",
        "aws", "gcloud", "az", "kubectl", "jira", "notify-send", "say", "espeak",
    }
)  # fmt: skip
"""Common programs that never run a command given in their arguments (what they write
themselves is the commit guard's, as for any program)."""
