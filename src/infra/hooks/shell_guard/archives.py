"""Compressors and archivers: `gzip f` replaces f by f.gz, `tar xf a.tar` unpacks files.

- `gzip`, `bzip2`, `xz`, `zstd`, `lz4`, `lzip`, `brotli`, `compress` and their `un...` forms
  write the file with the suffix added (or removed) and remove the original (unless `-k`; zstd
  and lz4 keep it unless `--rm`); `-c`, `-t`, `-l` write nothing; `-r` walks directories.
- `tar -c`/`-r`/`-u` write the archive; `tar -x` and `unzip` create files whose names are in
  the archive: unlisted (undetermined when they land inside the repository, `-C`/`-d` outside
  is fine); `--remove-files`/`zip -m` remove what they packed.
- `zip ARCHIVE FILES` writes the archive.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from .effects import Arg, Effects, read_options
from .utilities import Place, Rule


@dataclass(frozen=True)
class _Compressor:
    suffix: str
    decompress: bool = False
    keeps: bool = False
    """Keeps the original by default (zstd, lz4)."""


_COMPRESSORS: Final = {
    "gzip": _Compressor(".gz"),
    "gunzip": _Compressor(".gz", decompress=True),
    "pigz": _Compressor(".gz"),
    "unpigz": _Compressor(".gz", decompress=True),
    "bzip2": _Compressor(".bz2"),
    "bunzip2": _Compressor(".bz2", decompress=True),
    "pbzip2": _Compressor(".bz2"),
    "xz": _Compressor(".xz"),
    "unxz": _Compressor(".xz", decompress=True),
    "lzma": _Compressor(".lzma"),
    "unlzma": _Compressor(".lzma", decompress=True),
    "zstd": _Compressor(".zst", keeps=True),
    "unzstd": _Compressor(".zst", decompress=True, keeps=True),
    "lz4": _Compressor(".lz4", keeps=True),
    "unlz4": _Compressor(".lz4", decompress=True, keeps=True),
    "lzip": _Compressor(".lz"),
    "brotli": _Compressor(".br", keeps=True),
    "compress": _Compressor(".Z"),
    "uncompress": _Compressor(".Z", decompress=True),
}
_STDOUT: Final = frozenset({"-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list"})


def _compressor(spec: _Compressor) -> Rule:
    def rule(args: list[Arg], place: Place) -> Effects:
        options = read_options(
            args,
            short_values="SoTbBM",
            long_values=frozenset({"--suffix", "--output", "--threads", "--format", "--memlimit"}),
        )
        if options.has(*_STDOUT):
            return Effects()
        decompress = spec.decompress or options.has("-d", "--decompress", "--uncompress")
        keeps = options.has("-k", "--keep") or (spec.keeps and not options.has("--rm"))
        suffixes = options.values("-S", "--suffix")
        suffix = suffixes[-1] if suffixes and suffixes[-1] else spec.suffix
        outputs = options.values("-o", "--output")
        effects = Effects()
        recursive = options.has("-r", "--recursive")
        for name in options.operands:
            if name is None:
                effects.unknown.append("it compresses a file only known when it runs")
                continue
            if name == "-":
                continue
            if recursive and place.is_dir(name):
                effects.trees.append(name)  # each file replaced by its compressed copy
                effects.unlisted.append((name, "it writes a compressed copy of each file there"))
                continue
            if not keeps:
                effects.files.append(name)
            if not outputs:
                effects.files.append(_renamed(name, suffix, decompress))
        effects.files.extend(o for o in outputs if o)
        return effects

    return rule


def _renamed(name: str, suffix: str, decompress: bool) -> str:
    if not decompress:
        return name + suffix
    for known in (suffix, ".tgz", ".taz", ".tbz2", ".txz", ".tzst"):
        if name.endswith(known):
            base = name[: -len(known)]
            return base + ".tar" if known.startswith(".t") and known != suffix else base
    return name + ".out"  # the tool refuses an unknown suffix; nothing is written


_TAR_VALUES: Final = "fCbHIKLNTVXg"
_TAR_LONG: Final = frozenset(
    {"--file", "--directory", "--exclude", "--files-from", "--exclude-from", "--transform",
     "--xform", "--owner", "--group", "--mode", "--mtime", "--newer", "--after-date",
     "--format", "--use-compress-program", "--label", "--blocking-factor", "--record-size",
     "--starting-file", "--strip-components", "--suffix", "--backup", "--to-command",
     "--checkpoint-action", "--index-file", "--info-script", "--new-volume-script",
     "--rmt-command", "--rsh-command", "--volno-file", "--tape-length"}
)  # fmt: skip
_TAR_MODES: Final = {
    "c": "create", "r": "append", "u": "update", "A": "concatenate", "x": "extract",
    "t": "list", "d": "diff",
    "--create": "create", "--append": "append", "--update": "update", "--catenate": "concatenate",
    "--concatenate": "concatenate", "--extract": "extract", "--get": "extract",
    "--list": "list", "--diff": "diff", "--compare": "diff", "--delete": "delete",
}  # fmt: skip


def tar(args: list[Arg], place: Place) -> Effects:
    args = _tar_old_style(args)
    options = read_options(args, short_values=_TAR_VALUES, long_values=_TAR_LONG)
    mode = _tar_mode(options.flags)
    archives = options.values("-f", "--file")
    effects = Effects()
    if options.has("--to-command", "-I", "--use-compress-program", "--rsh-command",
                   "--info-script", "--new-volume-script", "--checkpoint-action"):  # fmt: skip
        effects.unknown.append("`tar` runs a program the guard does not follow")
    if mode in ("create", "append", "update", "concatenate", "delete"):
        for archive in archives:
            if archive is None:
                effects.unknown.append("`tar` writes an archive only known when it runs")
            elif archive != "-":
                effects.files.append(archive)
        if options.has("--remove-files"):
            for name in options.operands:
                if name is None:
                    effects.unknown.append("`tar --remove-files` of files only known when it runs")
                else:
                    effects.trees.append(name)
    elif mode == "extract" and not options.has("-O", "--to-stdout"):
        directories = options.values("-C", "--directory")
        where = directories[-1] if directories else "."
        if where is None:
            effects.unknown.append("`tar -x` unpacks into a directory only known when it runs")
        else:
            effects.unlisted.append((where, "`tar -x` unpacks files named in the archive"))
    return effects


def _tar_mode(flags: dict[str, list[Arg]]) -> str | None:
    for flag in flags:
        if flag in _TAR_MODES:
            return _TAR_MODES[flag]
        if len(flag) == 2 and flag[1] in "crutxdA":
            return _TAR_MODES[flag[1]]
    return None


def _tar_old_style(args: list[Arg]) -> list[Arg]:
    """`tar xzf a.tgz` (letters without a dash, values after them in order) as `tar -x -z
    -f a.tgz`."""
    if not args or args[0] is None or args[0].startswith("-"):
        return args
    letters, rest = args[0], list(args[1:])
    out: list[Arg] = []
    for letter in letters:
        out.append("-" + letter)
        if letter in _TAR_VALUES and rest:
            out.append(rest.pop(0))
    return out + rest


def unzip(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="dxPI", long_values=frozenset())
    if options.has("-l", "-t", "-v", "-p", "-c", "-Z", "-z"):
        return Effects()
    directories = options.values("-d")
    where = directories[-1] if directories else "."
    if where is None:
        return Effects(unknown=["`unzip -d` unpacks into a directory only known when it runs"])
    return Effects(unlisted=[(where, "`unzip` unpacks files named in the archive")])


def zip_(args: list[Arg], place: Place) -> Effects:
    options = read_options(args, short_values="bnPtxiZsOA", long_values=frozenset())
    if not options.operands:
        return Effects()
    archive, files = options.operands[0], options.operands[1:]
    effects = Effects()
    if archive is None:
        return Effects(unknown=["`zip` writes an archive only known when it runs"])
    if archive != "-":
        outputs = options.values("-O")
        effects.files.append(outputs[-1] if outputs and outputs[-1] else _zip_name(archive))
    if options.has("-m", "--move"):
        for name in files:
            if name is None:
                effects.unknown.append("`zip -m` removes files only known when they run")
            else:
                effects.trees.append(name)
    return effects


def _zip_name(archive: str) -> str:
    return archive if os.path.splitext(archive)[1] else archive + ".zip"


RULES: Final[dict[str, Rule]] = {
    **{name: _compressor(spec) for name, spec in _COMPRESSORS.items()},
    "tar": tar,
    "gtar": tar,
    "bsdtar": tar,
    "unzip": unzip,
    "zip": zip_,
}
