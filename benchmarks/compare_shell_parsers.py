"""Which shell parser reads the commands agents write? bashlex against tree-sitter-bash.

Each case is a command line and what a correct parse shows: every simple command (including
those inside substitutions, loops, functions and here-doc pipelines) as its words after quote
removal, with its redirections as `op target`; sorted, so only the contents count. A parser
scores a case when it accepts the text and its tree yields exactly that. Also printed: the
median time of one parse of a typical command.

    python3 scripts/uv run --with bashlex python benchmarks/compare_shell_parsers.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

CASES: list[tuple[str, list[str]]] = [
    ("echo x > a.txt", ["echo x > a.txt"]),
    ("echo x>a.txt", ["echo x > a.txt"]),
    ("echo x >> a.txt 2>&1", ["echo x >> a.txt 2>&1"]),
    ("echo x >| a.txt", ["echo x >| a.txt"]),
    ("echo x &> a.txt", ["echo x &> a.txt"]),
    ("echo x &>> a.txt", ["echo x &>> a.txt"]),
    ("cat 3<> a.txt", ["cat 3<> a.txt"]),
    ("cat <<EOF | tee out.txt\nhello $x\nEOF", ["cat << EOF", "tee out.txt"]),
    ("cat <<'EOF' > out.txt\n$(rm -rf /)\nEOF", ["cat << EOF > out.txt"]),
    ("tee -a log <<< 'text'", ["tee -a log <<< text"]),
    ("(cd src && sed -i 's/a/b/' app.py)", ["cd src", "sed -i s/a/b/ app.py"]),
    ("{ echo a; echo b; } > f", ["echo a", "echo b"]),
    ('for f in *.py; do sed -i s/a/b/ "$f"; done', ["sed -i s/a/b/ $f"]),
    ("if [ -f a ]; then echo x > f; fi", ["[ -f a ]", "echo x > f"]),
    ("while read l; do echo $l; done < in > out", ["read l", "echo $l"]),
    ("echo $(cat a) > b", ["cat a", "echo $(cat a) > b"]),
    ("x=$(sed -i s/a/b/ f)", ["sed -i s/a/b/ f"]),
    ("diff <(sort a) <(sort b)", ["diff <(sort a) <(sort b)", "sort a", "sort b"]),
    ("echo \"a;b\" > 'c d.txt'", ["echo a;b > c d.txt"]),
    ("echo $'a\\'b' > f", ["echo a'b > f"]),
    ("f() { echo x > g; }; f", ["echo x > g", "f"]),
    ("case $x in a) rm f;; *) touch g;; esac", ["rm f", "touch g"]),
    ("[[ -f a && -n $b ]] && rm a", ["rm a"]),
    ('echo x >> "$HOME/f"', ["echo x >> $HOME/f"]),
    ("time rm f", ["rm f"]),
    ("! rm f", ["rm f"]),
    ("echo {a,b}.txt", ["echo {a,b}.txt"]),
    ("rm -- -f", ["rm -- -f"]),
    ("exec 3>f", ["exec 3> f"]),
    ("cat a |& tee b", ["cat a", "tee b"]),
    ("echo x # > f", ["echo x"]),
    ("rm \\\n  f", ["rm f"]),
    ("echo $((1 + 2)) > n", ["echo $((1 + 2)) > n"]),
    ("sed -i'' -e 's/a/b/' f", ["sed -i -e s/a/b/ f"]),
    ("bash -c 'echo x > f'", ["bash -c echo x > f"]),
    ("echo ${x:-default} > f", ["echo ${x:-default} > f"]),
    ("echo x > f &", ["echo x > f"]),
    ("cat <<-EOF > out\n\tbody\n\tEOF", ["cat << EOF > out"]),
    ("a=1 b=2 make", ["make"]),
    ("find . -name '*.pyc' -exec rm {} \\;", ["find . -name *.pyc -exec rm {} ;"]),
    ("git checkout -- src/a.py && git stash pop", ["git checkout -- src/a.py", "git stash pop"]),
    ("echo `date` > stamp", ["date", "echo `date` > stamp"]),
    ('declare -a arr=(1 2); rm "${arr[@]}"', ["declare -a arr=(1 2)", "rm ${arr[@]}"]),
    ("python -c \"open('a.py', 'w').write('x')\"", ["python -c open('a.py', 'w').write('x')"]),
    ("ls > /dev/null 2>&1 || true", ["ls > /dev/null 2>&1", "true"]),
    ("for ((i=0; i<3; i++)); do touch f$i; done", ["touch f$i"]),
    ("coproc cat > f", ["cat > f"]),
    ("function f { rm a; }", ["rm a"]),
    ("cat <<EOF > o\na $(rm x) b\nEOF", ["cat << EOF > o", "rm x"]),
    ('echo "$(echo "a b")" > o', ['echo $(echo "a b") > o', "echo a b"]),
    ("[[ $x =~ ^a ]] && rm b", ["rm b"]),
]
"""(command, its simple commands). `time` and `coproc` may be kept as a first word: a guard
skips such prefixes anyway."""


# -- tree-sitter-bash --------------------------------------------------------------------------

_TS = Parser(Language(tree_sitter_bash.language()))
_PREFIXES = ("time ", "coproc ")


def ts_parse(text: str) -> list[str] | None:
    tree = _TS.parse(text.encode())
    if tree.root_node.has_error:
        return None
    found: list[str] = []
    _ts_walk(tree.root_node, found)
    return sorted(found)


def _ts_walk(node: Node, found: list[str]) -> None:
    if node.type in ("command", "declaration_command"):
        words = [_ts_word(child) for child in node.named_children]
        if node.type == "declaration_command":
            words = [_text(node.children[0]), *words]
        redirects = [_ts_redirect(r) for r in node.children_by_field_name("redirect")]
        redirects += _ts_outer_redirects(node)
        found.append(" ".join(w for w in words + redirects if w))
    if node.type == "test_command" and _text(node).startswith("[ "):
        found.append(_text(node))
    for child in node.children:
        _ts_walk(child, found)


def _ts_outer_redirects(command: Node) -> list[str]:
    parent = command.parent
    if parent is None or parent.type != "redirected_statement":
        return []
    out = []
    for child in parent.children_by_field_name("redirect"):
        out.append(_ts_redirect(child))
        out += [_ts_redirect(inner) for inner in child.children_by_field_name("redirect")]
    return out


def _ts_redirect(node: Node) -> str:
    fd = node.child_by_field_name("descriptor")
    prefix = "" if fd is None else _text(fd)
    if node.type == "heredoc_redirect":
        start = next(c for c in node.children if c.type == "heredoc_start")
        return f"<< {_text(start).strip(chr(39))}"
    op = next(c for c in node.children if not c.is_named)
    dest = node.child_by_field_name("destination") or node.named_children[-1]
    if _text(op).endswith("&"):
        return f"{prefix}{_text(op)}{_ts_word(dest)}"
    return f"{prefix}{_text(op)} {_ts_word(dest)}"


def _ts_word(node: Node) -> str:
    kind = node.type
    if kind == "command_name":
        return _ts_word(node.named_children[0])
    if kind in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
        return ""
    if kind == "variable_assignment" and node.parent and node.parent.type == "command":
        return ""  # `a=1 make`: an assignment prefix, not a word of the command
    if kind in ("word", "number"):
        return _unescape(_text(node))
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "ansi_c_string":
        return _text(node)[2:-1].replace("\\'", "'")
    if kind == "string":
        return _text(node)[1:-1]
    if kind == "concatenation":
        return "".join(_ts_word(child) for child in node.children)
    return _text(node)


def _unescape(text: str) -> str:
    out, escaped = [], False
    for char in text:
        if escaped:
            if char != "\n":
                out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


def _text(node: Node) -> str:
    return (node.text or b"").decode()


# -- bashlex -----------------------------------------------------------------------------------


def bashlex_parse(text: str) -> list[str] | None:
    import bashlex  # type: ignore[import-not-found]

    try:
        trees = bashlex.parse(text)
    except Exception:
        return None
    found: list[str] = []
    for tree in trees:
        _bl_walk(tree, found)
    return sorted(found)


def _bl_walk(node: Any, found: list[str]) -> None:
    if getattr(node, "kind", None) == "command":
        words, redirects = [], []
        for part in node.parts:
            if part.kind == "word":
                words.append(part.word)
            elif part.kind == "redirect":
                prefix = "" if getattr(part, "input", None) is None else str(part.input)
                target = part.output
                if isinstance(target, int):
                    redirects.append(f"{prefix}{part.type}{target}")
                elif part.type in ("<<", "<<-"):
                    redirects.append(f"<< {target.word}")
                else:
                    redirects.append(f"{prefix}{part.type} {target.word}")
        if node.parts and node.parts[0].kind == "assignment":
            words = words if words else words[1:]
        if words or redirects:
            found.append(" ".join(words + redirects))
    for child in _bl_children(node):
        _bl_walk(child, found)


def _bl_children(node: Any) -> Iterator[Any]:
    for attr in ("parts", "list", "command", "output", "heredoc"):
        value = getattr(node, attr, None)
        if isinstance(value, list):
            yield from value
        elif value is not None and hasattr(value, "kind"):
            yield value


# -- scoring -----------------------------------------------------------------------------------


def _same(got: list[str], expected: list[str]) -> bool:
    def plain(lines: list[str]) -> list[str]:
        stripped = []
        for line in lines:
            for prefix in _PREFIXES:
                line = line.removeprefix(prefix)
            stripped.append(line)
        return sorted(stripped)

    return plain(got) == plain(expected)


def score(name: str, parse: Callable[[str], list[str] | None]) -> tuple[int, int, list[str]]:
    """(right, refused valid shell, the wrong ones explained)."""
    right = refused = 0
    wrong = []
    for text, expected in CASES:
        try:
            got = parse(text)
        except Exception as exc:  # a crash is a refusal too
            got = None
            wrong.append(f"  {name}: {text!r} crashed: {type(exc).__name__}")
        if got is None:
            refused += 1
            wrong.append(f"  {name}: {text!r} refused")
        elif _same(got, expected):
            right += 1
        else:
            wrong.append(f"  {name}: {text!r}\n    got      {got}\n    expected {sorted(expected)}")
    return right, refused, wrong


def median_parse_us(parse: Callable[[str], object], text: str, rounds: int = 2000) -> float:
    parse(text)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        parse(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    typical = "cd src && sed -i 's/old/new/g' app.py utils.py | tee -a ../log.txt 2>&1"
    rows = []
    for name, parse in (("tree-sitter-bash", ts_parse), ("bashlex", bashlex_parse)):
        right, refused, wrong = score(name, parse)
        rows.append((name, right, refused, median_parse_us(parse, typical), wrong))
    for name, right, refused, micros, _ in rows:
        print(
            f"{name:17} {right:3}/{len(CASES)} right, {refused:2} valid commands refused, "
            f"one typical parse {micros:6.1f} µs"
        )
    for *_, wrong in rows:
        if wrong:
            print("\n".join(wrong))


if __name__ == "__main__":
    main()
