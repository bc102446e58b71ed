"""Every file tracekit writes goes through here: one atomic writer that never overwrites an input.

    with Outputs(inputs=[run_dir, *rule_files]) as out:   # checked before any work
        out.file(json_target); out.file(html_target)      # refused: an input, a bad folder
        ...                                               # the analysis
        out.write(json_target, text)                      # to a temporary beside the target
        out.write(html_target, page)
    # here every target is replaced, or (on any error) none is and no temporary is left

Rules every writer shares:

* A target that is an input file of the command (the same file by device and inode, so a
  symlink, a hard link, a relative spelling, a rank file of a run directory or a file deep in
  an Ascend export all count) is refused with ``FILE: is an input of this run; not
  overwritten`` before anything is written.
* A missing folder of a target is created with its parents (and removed again when the
  command fails); a folder that is a file, or is not writable, is a one-line error naming it.
* Files are created with mode 0666 less the umask (0644 under umask 022), folders 0777 less
  the umask, like any other program's files.
* A target whose name ends in ``.gz`` is written gzip-compressed (deterministic: no name, zero
  mtime) unless the caller says otherwise.

Imports only the standard library and :mod:`tracekit.errors`, so the capture hook can use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from tracekit.errors import ConfigError

INPUT_REFUSED = "is an input of this run; not overwritten"
GZIP_SUFFIX = ".gz"
GZIP_LEVEL = 6  # zlib level; isal (when installed) uses its own 0-3 scale, see _gzip
_FILE_MODE = 0o666  # less the umask, applied by the kernel at creation
_DIR_MODE = 0o777
_TMP_NAME_MAX = 200  # characters of the target's name kept in a temporary's name

StrPath = str | os.PathLike[str]
FileKey = tuple[int, int]  # (st_dev, st_ino)


class OutputError(ConfigError):
    """An output cannot be written where it was asked for (exit 2; an option error)."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


class Inputs:
    """The files a command reads, each known by (device, inode).

    A directory counts as every regular file below it (symlinked files are followed,
    symlinked folders are not, so a link cycle cannot loop)."""

    def __init__(self, paths: Iterable[StrPath | None] = ()) -> None:
        self._keys: set[FileKey] = set()
        for p in paths:
            self.add(p)

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, path: StrPath | None) -> None:
        if path is None:
            return
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return  # nothing there: the reader words the error
        if stat.S_ISDIR(st.st_mode):
            self._walk(os.fspath(path))
        elif stat.S_ISREG(st.st_mode):
            self._keys.add((st.st_dev, st.st_ino))

    def _walk(self, root: str) -> None:
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        continue
                    st = entry.stat()  # follows a symlinked file to what it names
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    self._keys.add((st.st_dev, st.st_ino))

    def holds(self, path: StrPath) -> bool:
        """Whether ``path`` is (or resolves to) one of the input files."""
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return False
        return (st.st_dev, st.st_ino) in self._keys


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def check_folder(folder: Path, target: Path, *, create: bool) -> None:
    """``folder`` can hold ``target``: it exists (or, with ``create``, can be made), is a
    folder and is writable. Raises OutputError naming ``target``."""
    if folder.exists():
        if not folder.is_dir():
            raise OutputError(f"{folder} is not a folder", target)
        if not _writable(folder):
            raise OutputError(f"folder {folder} is not writable", target)
        return
    if not create:
        raise OutputError(f"folder {folder} does not exist", target)
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            raise OutputError(f"folder {folder} cannot be created", target)
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{probe} is a file, not a folder", target)
    if not _writable(probe):
        raise OutputError(f"folder {probe} is not writable", target)


def check_file(target: StrPath, inputs: Inputs | None = None, *,
               make_parents: bool = True) -> Path:
    """The checks of a file output, done before any work; returns the target as a Path."""
    path = Path(target)
    if inputs is not None and inputs.holds(path):
        raise OutputError(INPUT_REFUSED, path)
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass  # the folder check words it
    except (OSError, ValueError) as exc:  # a name too long, a symlink loop, a NUL
        raise OutputError(_why(exc) if isinstance(exc, OSError) else str(exc), path) from exc
    if path.is_dir():
        raise OutputError("is a folder; give a file name", path)
    if path.exists() and not path.is_file():
        # a device, FIFO or socket (/dev/stdout): a rename would replace the node itself
        raise OutputError("is not a regular file; give a file name", path)
    if not path.name or path.name in (".", ".."):
        raise OutputError("is not a file name", path)
    check_folder(path.parent, path, create=make_parents)
    return path


def check_output_folder(target: StrPath, inputs: Inputs | None = None) -> Path:
    """The checks of a folder output (created with its parents when missing)."""
    path = Path(target)
    if inputs is not None and inputs.holds(path):
        raise OutputError(INPUT_REFUSED, path)
    if path.exists():
        if not path.is_dir():
            raise OutputError("is a file, not a folder", path)
        if not _writable(path):
            raise OutputError("folder is not writable", path)
        return path
    check_folder(path.parent, path, create=True)
    return path


def make_folder(target: StrPath) -> Path:
    """Create folder ``target`` with its parents (0777 less the umask); one-line errors."""
    path = check_output_folder(target)
    try:
        path.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder: {_why(exc)}", path) from exc
    return path


# ---------------------------------------------------------------------------------------------
# Temporaries
# ---------------------------------------------------------------------------------------------


def _temp_name(target: Path, suffix: str) -> Path:
    return target.with_name(f".{target.name[:_TMP_NAME_MAX]}.{secrets.token_hex(4)}{suffix}")


def temp_file(target: Path) -> Path:
    """A new empty file beside ``target`` (mode 0666 less the umask), for writing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = _temp_name(target, ".tmp")
        try:
            fd = os.open(tmp, flags, _FILE_MODE)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise OutputError("cannot find a free temporary name", target)  # pragma: no cover


def temp_folder(target: Path) -> Path:
    """A new empty folder beside ``target`` (mode 0777 less the umask)."""
    for _ in range(100):
        tmp = _temp_name(target, ".tmpdir")
        try:
            os.mkdir(tmp, _DIR_MODE)
        except FileExistsError:
            continue
        return tmp
    raise OutputError("cannot find a free temporary name", target)  # pragma: no cover


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _gzip(raw: IO[bytes]) -> IO[bytes]:
    """A deterministic gzip writer over ``raw`` (isal when installed: several times faster)."""
    try:
        from isal import igzip

        return cast(IO[bytes], igzip.IGzipFile(fileobj=raw, mode="wb", compresslevel=2,
                                               mtime=0, filename=""))
    except ImportError:
        import gzip

        return cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL,
                                             mtime=0, filename=""))


def wants_gzip(target: StrPath, compress: bool | None = None) -> bool:
    return Path(target).name.endswith(GZIP_SUFFIX) if compress is None else compress


# ---------------------------------------------------------------------------------------------
# One command's outputs
# ---------------------------------------------------------------------------------------------


class Outputs:
    """All outputs of one command: planned and checked first, written to temporaries beside
    their targets, and put in place together by :meth:`commit` (or all discarded).

    Used as a context manager: a clean exit commits, an exception discards."""

    def __init__(self, inputs: Inputs | Iterable[StrPath | None] = ()) -> None:
        self.inputs = inputs if isinstance(inputs, Inputs) else Inputs(inputs)
        self._staged: list[tuple[Path, Path]] = []  # (temporary, target)
        self._planned: dict[str, Path] = {}  # absolute target -> as given
        self._folders: set[str] = set()  # the planned targets that are folders
        self._parents_ok: set[str] = set()  # folders that may be created when first written
        self._made: list[Path] = []  # folders created here, removed again on discard

    # ------------------------------------------------------------------ planning

    def planned(self, target: StrPath) -> bool:
        return os.path.abspath(target) in self._planned

    def _claim(self, path: Path) -> None:
        key = os.path.abspath(path)
        real = os.path.realpath(path)
        for other_key, other in self._planned.items():
            if key == other_key or real == os.path.realpath(other):
                raise OutputError(f"is given for two outputs ({other})", path)
        self._planned[key] = path

    def file(self, target: StrPath | None, *, make_parents: bool = True) -> Path | None:
        """Plan a file output (None passes through); checks it now."""
        if target is None:
            return None
        path = check_file(target, self.inputs, make_parents=make_parents)
        self._claim(path)
        if make_parents:
            self._parents_ok.add(os.path.abspath(path.parent))
        return path

    def folder(self, target: StrPath | None) -> Path | None:
        """Plan a folder output (created with its parents when first written into)."""
        if target is None:
            return None
        if os.path.abspath(target) in self._folders:
            return Path(target)
        path = check_output_folder(target, self.inputs)
        self._claim(path)
        self._folders.add(os.path.abspath(path))
        self._parents_ok.add(os.path.abspath(path))
        return path

    def refuse_input(self, target: StrPath | None) -> None:
        """Only the input check, for a file written some other way (appended to)."""
        if target is not None and self.inputs.holds(target):
            raise OutputError(INPUT_REFUSED, Path(target))

    # ------------------------------------------------------------------ writing

    def _may_create(self, folder: Path) -> bool:
        key = os.path.abspath(folder)
        return any(key == ok or key.startswith(ok + os.sep) for ok in self._parents_ok)

    def _mkdirs(self, folder: Path, target: Path) -> None:
        missing: list[Path] = []
        probe = folder
        while not probe.exists() and probe.parent != probe:
            missing.append(probe)
            probe = probe.parent
        for d in reversed(missing):
            try:
                os.mkdir(d, _DIR_MODE)
            except FileExistsError:
                continue
            except OSError as exc:
                raise OutputError(f"cannot create folder {d}: {_why(exc)}", target) from exc
            self._made.append(d)

    def _stage(self, target: Path) -> Path:
        """Check ``target`` (when not planned) and create its temporary."""
        if os.path.abspath(target) not in self._planned:
            self.file(target)
        if not target.parent.exists() and self._may_create(target.parent):
            self._mkdirs(target.parent, target)
        try:
            tmp = temp_file(target)
        except OSError as exc:
            raise OutputError(f"cannot write: {_why(exc)}", target) from exc
        self._staged.append((tmp, target))
        return tmp

    @contextlib.contextmanager
    def path(self, target: StrPath) -> Iterator[Path]:
        """A temporary path to write ``target`` through (for writers that want a file name;
        no compression is added). It becomes ``target`` at commit."""
        dest = Path(target)
        tmp = self._stage(dest)
        try:
            yield tmp
        except OSError as exc:
            raise OutputError(f"cannot write: {_why(exc)}", dest) from exc

    @contextlib.contextmanager
    def stream(self, target: StrPath, *, compress: bool | None = None) -> Iterator[IO[bytes]]:
        """A binary stream that becomes ``target`` at commit; gzip when the name ends .gz."""
        dest = Path(target)
        tmp = self._stage(dest)
        try:
            with open(tmp, "wb") as raw:
                if wants_gzip(dest, compress):
                    with _gzip(raw) as out:
                        yield out
                else:
                    yield raw
        except OSError as exc:
            raise OutputError(f"cannot write: {_why(exc)}", dest) from exc

    def write(self, target: StrPath, content: str | bytes, *,
              compress: bool | None = None) -> Path:
        """Write ``content`` (str as UTF-8) to ``target``'s temporary."""
        data = content.encode("utf-8") if isinstance(content, str) else content
        with self.stream(target, compress=compress) as fh:
            fh.write(data)
        return Path(target)

    def write_with(self, target: StrPath, write: Callable[[IO[bytes]], Any], *,
                   compress: bool | None = None) -> Path:
        """Call ``write(stream)`` for ``target``'s temporary."""
        with self.stream(target, compress=compress) as fh:
            write(fh)
        return Path(target)

    # ------------------------------------------------------------------ finishing

    def commit(self) -> list[Path]:
        """Put every staged output in place; returns the targets in the order written."""
        done: list[Path] = []
        staged, self._staged = self._staged, []
        for i, (tmp, target) in enumerate(staged):
            try:
                os.replace(tmp, target)
            except OSError as exc:
                for rest, _ in staged[i:]:
                    _unlink(rest)
                raise OutputError(f"cannot write: {_why(exc)}", target) from exc
            done.append(target)
        self._made = []
        return done

    def discard(self) -> None:
        """Remove every temporary and every folder created here; no target is touched."""
        staged, self._staged = self._staged, []
        for tmp, _ in staged:
            _unlink(tmp)
        for d in reversed(self._made):
            with contextlib.suppress(OSError):
                d.rmdir()  # only when empty
        self._made = []

    def __enter__(self) -> Outputs:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


# ---------------------------------------------------------------------------------------------
# One output at a time
# ---------------------------------------------------------------------------------------------


def write_file(target: StrPath, content: str | bytes, *, inputs: Iterable[StrPath] = (),
               compress: bool | None = None, make_parents: bool = True) -> Path:
    """Write ``content`` to ``target`` atomically (temporary beside it, then rename)."""
    with Outputs(inputs) as out:
        out.file(target, make_parents=make_parents)
        out.write(target, content, compress=compress)
    return Path(target)


@contextlib.contextmanager
def atomic_stream(target: StrPath, *, compress: bool | None = None,
                  make_parents: bool = True) -> Iterator[IO[bytes]]:
    """A binary stream that becomes ``target`` when the block completes."""
    with Outputs() as out:
        out.file(target, make_parents=make_parents)
        with out.stream(target, compress=compress) as fh:
            yield fh


@contextlib.contextmanager
def atomic_path(target: StrPath, *, make_parents: bool = True) -> Iterator[Path]:
    """A temporary path that becomes ``target`` when the block completes."""
    with Outputs() as out:
        out.file(target, make_parents=make_parents)
        with out.path(target) as tmp:
            yield tmp


@contextlib.contextmanager
def atomic_folder(target: StrPath) -> Iterator[Path]:
    """A temporary folder beside ``target``, renamed onto it when the block completes.

    When ``target`` appears meanwhile (a concurrent writer won the race), the existing one
    is kept and ours is dropped: for caches, where either copy is as good."""
    dest = Path(target)
    make_folder(dest.parent)
    try:
        tmp = temp_folder(dest)
    except OSError as exc:
        raise OutputError(f"cannot write: {_why(exc)}", dest) from exc
    try:
        yield tmp
        try:
            os.replace(tmp, dest)
        except OSError:
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


__all__ = [
    "INPUT_REFUSED", "Inputs", "OutputError", "Outputs", "atomic_folder", "atomic_path",
    "atomic_stream", "check_file", "check_folder", "check_output_folder", "make_folder",
    "temp_file", "temp_folder", "wants_gzip", "write_file",
]
