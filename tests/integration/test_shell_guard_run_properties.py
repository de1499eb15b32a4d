"""Properties, by class: whatever hypothesis builds, what the hook allows changes only files
the agent holds.

Each class of issue 32 that has a grammar gets a generator: substitutions nested in every
place bash runs them, wrappers stacked around a writer, programs fed to interpreters on
their input, paths through symlinks, `..`, `/proc/self` and open descriptors. Every command is
judged by the real hook (tests/shell_run_support.py) and then run by bash, whatever the
decision, in a copy of the corpus repository; the files that changed are compared:
- an allowed command changed only files the agent holds;
- judging changed nothing;
- unless the guard said it cannot tell, every file that changed was named (held, or listed
  as not locked): the guard's list is complete, not only safe.

`SHELL_GUARD_EXAMPLES=500` runs each deeper (default 25).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockyard.infra.lockstore.scope_keys import glob_matches, is_glob_key
from shell_run_support import (
    FILES,
    Outcome,
    Sandbox,
    changed,
    judge_and_run,
    make_template,
    scratch_space,
    snapshot,
)

EXAMPLES = int(os.environ.get("SHELL_GUARD_EXAMPLES", "25"))
TARGETS = ["notes.txt", "README.md", "src/app.py", "src/utils.py", "src/pkg/core.py", "new.txt"]
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with scratch_space(tmp_path_factory.mktemp("properties")) as directory:
        yield directory


@pytest.fixture(scope="module")
def template(scratch: Path) -> Path:
    repo = make_template(scratch, {**FILES, "src/sub/inner.py": "inner = 1\n"})
    os.symlink("src/sub", repo / "deep")
    return repo


def check(template: Path, command: str, held: set[str]) -> Outcome:
    """Judge `command` by the hook, run it whatever the decision, and check the properties."""
    root = Path(tempfile.mkdtemp(dir=template.parent))
    try:
        sandbox = Sandbox.copy_of(template, root / "case")
        outcome = judge_and_run(sandbox, command, held, run=False)
        before = snapshot(sandbox.repo)
        outcome.exit_code, outcome.output = sandbox.run(command)
        outcome.changed = changed(before, snapshot(sandbox.repo))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert not outcome.changed_by_judging, outcome.explain()
    if outcome.verdict.allowed:
        assert outcome.changed <= held, outcome.explain()
    if not outcome.verdict.undetermined and not outcome.verdict.refused:
        assert outcome.changed <= held | set(outcome.verdict.unlocked), outcome.explain()
    return outcome


def writer(target: str) -> st.SearchStrategy[str]:
    quoted = shlex.quote(target)
    return st.sampled_from(
        [
            f"echo x > {quoted}",
            f"echo x >> {quoted}",
            f"rm -f {quoted}",
            f"touch {quoted}",
            f"sed -i s/a/b/ {quoted}",
            f"printf y | tee {quoted} > /dev/null",
            f"truncate -s 0 {quoted}",
            f"cp README.md {quoted}",
        ]
    )


held_files = st.sets(st.sampled_from(TARGETS), max_size=3)


# -- class 2: substitutions nested wherever bash runs them ----------------------------------

NESTINGS = [
    "echo $({})",
    "echo `{}`",
    "echo $(( $({}; echo 1) + 1 ))",
    ": ${{x:=$({})}}",
    ": ${{x:-$({})}}",
    "a[$({}; echo 0)]=1",
    "[[ -n $({}) ]] || true",
    "case $({}) in *) ;; esac",
    "for x in $({}); do :; done",
    'echo "$({})"',
    "cat <<EOF > /dev/null\n$({})\nEOF",
    "cat <(cd . && {}) > /dev/null",
    "f() {{ local x=$({}); }}; f",
    "export X=$({})",
    "(( y = $({}; echo 2) ))",
    "cat <<< $({}) > /dev/null",
    'cat <<< "$({})" > /dev/null',
    "case x in $({}) | *) ;; esac",
    "a=($({}))",
    "declare -a a=(1 $({}))",
    "echo $[ $({}; echo 1) + 1 ]",
    "[[ $({}) == x ]] || true",
    ": ${{x/$({})/y}}",
    'echo "${{x:-"$({})"}}"',
    "let 'y = $({}; echo 1)'",
    "if $({}; echo true); then :; fi",
    ": > >({})",
    "echo $( ( {} ) )",
    "cat <<-B > /dev/null\n\t$({})\n\tB",
    "x=$(cat <<A\n$({})\nA\n)",
    "cat <<'EOF' > /dev/null\n$({0})\nEOF\n{0}",
    "cat <<EOF > /dev/null\n$({})",
]


@st.composite
def nested(draw: st.DrawFn) -> str:
    command = draw(writer(draw(st.sampled_from(TARGETS))))
    for _ in range(draw(st.integers(1, 3))):
        command = draw(st.sampled_from(NESTINGS)).format(command)
    return command


@SETTINGS
@given(command=nested(), held=held_files)
@example(command=": ${x:=$(echo x > notes.txt)}", held=set())
@example(
    command="(( y = $(cat <<EOF > /dev/null\n$(cat <<EOF > /dev/null\n$(echo x > notes.txt)\n"
    "EOF)\nEOF; echo 2) ))",
    held=set(),
)
@example(command="cat <<-B > /dev/null\n\t$(echo x > notes.txt)\n\tB", held=set())
@example(  # bash 5.2 runs `touch notes.txt echo 1`: the `;` after a here-doc in `$(` is lost
    command="echo $[ $(cat <<'EOF' > /dev/null\n$(touch notes.txt)\nEOF\n"
    "touch notes.txt; echo 1) + 1 ]",
    held={"notes.txt"},
)
def test_nested_substitutions(template: Path, command: str, held: set[str]) -> None:
    check(template, command, held)


# -- class 4: wrappers stacked around a writer ---------------------------------------------

WRAPPERS = [
    "setsid {}",
    "taskset -c 0 {}",
    "nice -n 1 {}",
    "nohup {} > /dev/null 2>&1",
    "timeout 5 {}",
    "env -u UNSET_VARIABLE {}",
    "env FOO=1 {}",
    "stdbuf -oL {}",
    "command {}",
    # One lock file per level: `flock F flock F cmd` waits for itself until the run's timeout.
    "flock /tmp/lockyard-shell-guard-property-{level}.lock {}",
    "time {}",
    "prlimit --nofile=256 {}",
    "script -qc {quoted} /dev/null",
    "sh -c {quoted}",
    "bash -c {quoted}",
    "eval {quoted}",
    "coproc {}; wait",
]


@st.composite
def wrapped(draw: st.DrawFn) -> str:
    target = draw(st.sampled_from(TARGETS))
    command = draw(writer(target))
    for level in range(draw(st.integers(1, 3))):
        shape = draw(st.sampled_from(WRAPPERS))
        if "{quoted}" in shape:
            command = shape.format(quoted=shlex.quote(command), level=level)
        elif " > /dev/null" in command or "|" in command:
            command = shape.format(f"sh -c {shlex.quote(command)}", level=level)
        else:
            command = shape.format(command, level=level)
    return command


@SETTINGS
@given(command=wrapped(), held=held_files)
@example(command="setsid taskset -c 0 rm -f notes.txt", held=set())
def test_wrappers(template: Path, command: str, held: set[str]) -> None:
    check(template, command, held)


# -- class 1: programs on the input of an interpreter --------------------------------------

PROGRAMS = {
    "python": [
        "open({t!r}, 'w').write('x')",
        "import os\nos.remove({t!r})",
        "import shutil\nshutil.copy('README.md', {t!r})",
        "from pathlib import Path\nPath({t!r}).write_text('y')",
        "import subprocess\nsubprocess.run(['touch', {t!r}])",
        "print('only reads', open('README.md').read()[:3])",
    ],
    "shell": ["echo x > {t}", "rm -f {t}", "touch {t}", "cd src && ls > /dev/null", "ls"],
    "node": [
        "require('fs').writeFileSync({t!r}, 'x')",
        "console.log(require('fs').readFileSync('README.md', 'utf8').length)",
    ],
}
INTERPRETERS = {
    "python": ["python3", "python3 -", "python3 /dev/stdin"],
    "shell": ["bash", "sh", "bash -s", "sh -s"],
    "node": ["node", "node -"],
}
FEEDERS = [
    "{interpreter} <<'EOF'\n{program}\nEOF",
    "cat <<'EOF' | {interpreter}\n{program}\nEOF",
    "printf '%s\\n' {quoted} | {interpreter}",
    "{interpreter} <<< {quoted}",
]


@st.composite
def fed(draw: st.DrawFn) -> str:
    language = draw(st.sampled_from(sorted(PROGRAMS)))
    target = draw(st.sampled_from(TARGETS))
    program = draw(st.sampled_from(PROGRAMS[language])).format(t=target)
    interpreter = draw(st.sampled_from(INTERPRETERS[language]))
    feeder = draw(st.sampled_from(FEEDERS))
    return feeder.format(interpreter=interpreter, program=program, quoted=shlex.quote(program))


@SETTINGS
@given(command=fed(), held=held_files)
@example(command="python3 - <<'EOF'\nopen('notes.txt', 'w').write('x')\nEOF", held=set())
def test_programs_on_the_input(template: Path, command: str, held: set[str]) -> None:
    check(template, command, held)


# -- classes 5 and 6: paths the command's process resolves ---------------------------------

SPELLINGS = [
    "{t}",
    "./{t}",
    "deep/../../{t}",
    "deep/../{b}",
    "src/../{t}",
    "/proc/self/cwd/{t}",
    "$PWD/{t}",
    "/proc/self/root$PWD/{t}",
]
DESCRIPTORS = [
    "exec 3<{t}; echo x > /dev/fd/3",
    "exec 3<{t}; echo x >> /proc/self/fd/3",
    "{{ echo x > /dev/fd/4; }} 4<{t}",
    "cat README.md 5<{t} > /dev/fd/5",
    "exec 6<>{t}; exec 7>&6; echo x > /dev/fd/7",
    "cd src && echo x > /proc/self/cwd/../{t}",
]


@st.composite
def spelled(draw: st.DrawFn) -> str:
    target = draw(st.sampled_from(TARGETS))
    if draw(st.booleans()):
        return draw(st.sampled_from(DESCRIPTORS)).format(t=target)
    path = draw(st.sampled_from(SPELLINGS)).format(t=target, b=os.path.basename(target))
    return draw(writer(path)).replace(shlex.quote(path), path)


@SETTINGS
@given(command=spelled(), held=st.one_of(held_files, st.just({"app.py"})))
@example(command="echo x > deep/../app.py", held={"app.py"})
@example(command="exec 3<notes.txt; echo x > /dev/fd/3", held=set())
def test_paths_as_the_process_resolves_them(template: Path, command: str, held: set[str]) -> None:
    check(template, command, held)


# -- issue 28: whole-tree commands under directory and glob locks --------------------------

SCOPES = [
    "src/", "src/**", "src/**/*", "src/**/*.py", "src/pkg/", "src/pkg/**", "src/pkg/**/*.py",
    "src/pkg/*.py", "src/app.py", "src/pkg/core.py", "src/pkg/data.json",
    "src/pkg/deep/more.py", "src/pkg/deep/empty/",
]  # fmt: skip
TREE_WRITERS = [
    "rm -r src/pkg",
    "rm -r src/pkg/deep",
    "rm -rf src",
    "chmod -R g+w src/pkg",
    "ruff format src",
    "ruff format src/pkg",
    "mkdir -p src/new/deep",
    "mkdir -p src/pkg/sub",
    "rmdir src/pkg/empty",
    "git checkout -- src/",
    "git checkout -- src/pkg",
    "cp -r src/pkg src/copy",
    "sed -i s/1/2/ src/pkg/*.py",
    "touch src/pkg/new.md",
]
BOB = "bob"


@pytest.fixture(scope="module")
def tree_template(scratch: Path) -> Path:
    """The corpus repository with a non-Python file, a deeper package and empty directories
    under `src/pkg/`, and two Python files changed since the commit (unformatted, so `ruff
    format` and `git checkout` both rewrite them)."""
    files = {**FILES, "src/pkg/data.json": "{}\n", "src/pkg/deep/more.py": "more = 1\n"}
    repo = make_template(scratch / "trees", files)
    (repo / "src" / "pkg" / "empty").mkdir()
    (repo / "src" / "pkg" / "deep" / "empty").mkdir()
    (repo / "src" / "app.py").write_text("value=2\n")
    (repo / "src" / "pkg" / "core.py").write_text("core=False\n")
    return repo


def covered(name: str, keys: set[str]) -> bool:
    """Whether a lock of one of `keys` covers the repository path `name` (a file, or a
    directory)."""
    return any(
        key == name
        or (key.endswith("/") and f"{name}/".startswith(key))
        or (is_glob_key(key) and glob_matches(key, name))
        for key in keys
    )


def directories(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(top, d), root)
        for top, dirs, _ in os.walk(root)
        for d in dirs
        if ".git" not in os.path.join(top, d).split(os.sep)
    }


@SETTINGS
@given(
    mine=st.sets(st.sampled_from(SCOPES), max_size=2),
    theirs=st.sets(st.sampled_from(SCOPES), max_size=1),
    command=st.sampled_from(TREE_WRITERS),
)
@example(mine={"src/**/*.py"}, theirs=set(), command="rm -r src/pkg")
@example(mine={"src/**"}, theirs=set(), command="rm -rf src")
@example(mine=set(), theirs={"src/pkg/"}, command="rmdir src/pkg/empty")
@example(  # the directory bob holds has no file in it to refuse for
    mine={"src/pkg/deep/more.py"}, theirs={"src/pkg/deep/empty/"}, command="rm -r src/pkg/deep"
)
def test_whole_tree_commands_under_directory_and_glob_locks(
    tree_template: Path, mine: set[str], theirs: set[str], command: str
) -> None:
    """Judged by the hook with alice holding `mine` and bob what he could take of `theirs`,
    run by bash whatever the decision: an allowed command changed only files alice's locks
    cover and bob's do not, and created or removed no directory bob's locks cover; unless
    the guard said it cannot tell, every file that changed is covered by alice's locks or
    named in the denial."""
    root = Path(tempfile.mkdtemp(dir=tree_template.parent))
    try:
        sandbox = Sandbox.copy_of(tree_template, root / "case")
        store = sandbox.lock(mine)
        granted = {key for key in sorted(theirs) if store.try_lock(key, BOB)}
        outcome = judge_and_run(sandbox, command, set(), run=False)
        before, folders = snapshot(sandbox.repo), directories(sandbox.repo)
        outcome.exit_code, outcome.output = sandbox.run(command)
        files = changed(before, snapshot(sandbox.repo))
        moved = folders ^ directories(sandbox.repo)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    said = f"{outcome.explain()}\nalice holds {sorted(mine)}, bob {sorted(granted)}"
    assert not outcome.changed_by_judging, said
    if outcome.verdict.allowed:
        assert all(covered(f, mine) and not covered(f, granted) for f in files), said
        assert not any(covered(d, granted) for d in moved), said
    if not outcome.verdict.undetermined and not outcome.verdict.refused:
        named = mine | {name.rstrip("/") + "/" for name in outcome.verdict.unlocked}
        named |= set(outcome.verdict.unlocked)
        assert all(covered(f, named) for f in files), said
