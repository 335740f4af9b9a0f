"""Faults in the store: a `weightkit create` killed partway leaks nothing for good, and `prune` (or `rm`, or the
next `create`) never takes a file a running writer needs, nor a blob whose manifest is being written."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from weightkit.errors import UnsupportedError
from weightkit.gguf import write_gguf
from weightkit.ollama import Manifest, Removed, Store, create_from_gguf
from weightkit.ollama import store as store_module
from weightkit.ollama.store import parse_manifest

from ._cli import cli_env, run, start

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock, SIGSTOP and SIGKILL are POSIX")

CONFIG = "application/vnd.docker.container.image.v1+json"
MODEL = "application/vnd.ollama.image.model"


@pytest.fixture(scope="module")
def big_gguf(tmp_path_factory) -> Path:
    """128 MiB: writing it takes long enough to stop the write halfway, on any machine; in 64 tensors, as
    the model layer is written tensor by tensor (a stopped process has each write whole or not begun)."""
    path = tmp_path_factory.mktemp("big") / "big.gguf"
    w = np.arange(32 << 20, dtype=np.float32).reshape(64, -1, 1024)
    write_gguf(path, {"general.architecture": "llama"}, {f"w{i}": w[i] for i in range(64)})
    return path


@pytest.fixture
def small_gguf(tmp_path) -> Path:
    path = tmp_path / "small.gguf"
    write_gguf(path, {"general.architecture": "llama"}, {"w": np.ones((4, 32), np.float32)})
    return path


def stop_mid_write(proc: subprocess.Popen, blobs: Path, total: int) -> Path:
    """Stop `proc` (SIGSTOP) at a moment its model's temp file in `blobs` is written partway, and return that file.

    It is stopped and looked at, then let go on, until the look finds a part-written file: what a stopped
    process shows cannot change, so the answer is certain, however fast the machine."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the create ended before it was caught writing: {proc.communicate()}"
        os.kill(proc.pid, signal.SIGSTOP)
        os.waitpid(proc.pid, os.WUNTRACED)
        # the model layer is llama-quantize COPY's output, written through atomic_write's temp beside the
        # transaction's name (a finished one is renamed to `.partial`, whole: not what is wanted here)
        written = blobs.glob(".sha256-*.partial.*.tmp") if blobs.is_dir() else []
        partial = [p for p in written if 0 < p.stat().st_size < total]
        if partial:
            return partial[0]
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.002)
    raise AssertionError("the create never started writing")


def kill_mid_write(store: Store, env: dict[str, str], source: Path) -> Path:
    """`kill -9` a real `weightkit create` while it writes `source`'s model layer; returns the temp file it leaves."""
    proc = start("create", "killed", "--from", source, env=env)
    try:
        return stop_mid_write(proc, store.blobs, source.stat().st_size)
    finally:
        proc.kill()
        proc.wait()


def named_blobs(store: Store, *more: Path) -> set[str]:
    """The file names of the blobs the store's models (and the manifests at `more`) name."""
    names = set()
    for path in [*(path for _, path in store.models()), *more]:
        manifest = parse_manifest(path, path.read_bytes())
        names.update(store.blob_path(layer.digest).name for layer in (manifest.config, *manifest.layers))
    return names


def assert_consistent(store: Store) -> None:
    """Every model's blobs are there and match their digests."""
    for name, _ in store.models():
        assert store.verify(name) == [], name


@pytest.mark.slow
@pytest.mark.parametrize("cleaner", ["prune", "rm", "create"])
def test_killed_create_leaks_nothing(tmp_path, big_gguf, small_gguf, cleaner):
    store = Store(tmp_path / "store")
    env = cli_env(OLLAMA_MODELS=str(store.root))
    create_from_gguf(store, "small", small_gguf)
    partial = kill_mid_write(store, env, big_gguf)

    # the store is consistent: the old model intact, no manifest for the killed import, its temp file left
    assert [name.short for name, _ in store.models()] == ["small:latest"]
    assert_consistent(store)
    size = partial.stat().st_size
    assert 0 < size < big_gguf.stat().st_size

    if cleaner == "prune":
        removed = [{"path": str(partial), "kind": "temp", "bytes": size}]
        assert json.loads(run("prune", "--dry-run", "--json", env=env).stdout)["removed"] == removed
        assert partial.exists()
        r = run("prune", "--json", env=env)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["removed"] == removed and doc["bytes_freed"] == size and doc["in_use"] == [] and not doc["dry_run"]
    elif cleaner == "rm":
        assert run("rm", "small", env=env).returncode == 0
    else:
        assert run("create", "again", "--from", small_gguf, env=env).returncode == 0
    assert not partial.exists()
    assert {p.name for p in store.blobs.iterdir()} == named_blobs(store)  # nothing else: no temp, no orphan
    assert list(store.root.glob(".weightkit/writer-*")) == []  # the dead writer's lock file went too
    assert_consistent(store)


@pytest.mark.slow
def test_prune_beside_a_running_create(tmp_path, big_gguf, weightkit_cli):
    """A prune while an import writes (a second process, stopped mid-write so the test is certain) leaves
    the import's temp file, and the import then finishes as if nothing happened. The prunes run in this
    process: the import is the other one."""
    store = Store(tmp_path / "store")
    env = cli_env(OLLAMA_MODELS=str(store.root))
    proc = start("create", "big", "--from", big_gguf, "--json", env=env)
    try:
        partial = stop_mid_write(proc, store.blobs, big_gguf.stat().st_size)
        size = partial.stat().st_size
        r = weightkit_cli("prune", "--json", env={"OLLAMA_MODELS": str(store.root)})
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == {
            "dry_run": False, "removed": [], "bytes_freed": 0, "in_use": [str(partial)], "unreadable_manifests": [],
        }  # fmt: skip
        assert partial.stat().st_size == size
        assert "kept 1 file that a running import is writing" in weightkit_cli("prune").stdout
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["model"] == "big:latest"
    assert_consistent(store)
    assert [p.name for p in store.blobs.iterdir()] and not list(store.blobs.glob("*.partial"))
    assert weightkit_cli("prune", "--json").stdout.count('"path"') == 0  # everything is named


def test_prune_waits_for_a_manifest_being_written(tmp_path, small_gguf, monkeypatch):
    """The window where a create has renamed its blobs to their digests and not yet written its manifest: a
    prune started then (with its own open of the lock file, as another process has) waits for the manifest,
    then finds nothing to remove. Without the store lock it would remove both blobs at once."""
    store = Store(tmp_path / "store")
    placed, go_on = threading.Event(), threading.Event()
    write_manifest = Store._write_manifest

    def slow_write_manifest(self, name, manifest):
        placed.set()
        assert go_on.wait(60)
        return write_manifest(self, name, manifest)

    monkeypatch.setattr(Store, "_write_manifest", slow_write_manifest)
    create = threading.Thread(target=create_from_gguf, args=(store, "m", small_gguf))
    create.start()
    assert placed.wait(60)
    blobs = sorted(store.blobs.iterdir())
    assert len(blobs) == 2 and all(re.fullmatch("sha256-[0-9a-f]{64}", p.name) for p in blobs)  # placed
    assert not store.manifest_path("m").exists()
    reports = []
    prune = threading.Thread(target=lambda: reports.append(store.prune()))
    prune.start()
    try:
        prune.join(0.5)
        assert prune.is_alive() and sorted(store.blobs.iterdir()) == blobs  # waiting for the store lock
    finally:
        go_on.set()
    create.join(60)
    prune.join(60)
    assert reports[0].removed == []
    assert store.verify("m") == [] and sorted(store.blobs.iterdir()) == blobs


def test_pending_blobs_survive_prune(tmp_path):
    """A transaction's blobs are temp files until its commit, held by its writer lock: prune keeps them. Content
    already stored is held by a hard link, so prune may remove that blob (nothing names it) and lose nothing."""
    store = Store(tmp_path)
    orphan = orphan_blob(store, b"shared")
    with store.transaction() as tx:
        config = tx.add_bytes(b"{}", CONFIG)  # new content: a temp file
        layer = tx.add_bytes(b"shared", MODEL)  # stored content: a link to the stored blob
        report = store.prune()
        assert sorted(report.in_use) == sorted(store.blobs.glob(f"sha256-{tx.id}-*.partial"))
        assert len(report.in_use) == 2
        assert report.removed == [Removed(orphan, "blob", 0)]  # the link keeps its bytes
        assert not orphan.exists()
        tx.write_manifest("m", Manifest(config, [layer]))
    assert store.verify("m") == [] and orphan.read_bytes() == b"shared"
    assert store.prune().removed == []
    assert {p.name for p in store.blobs.iterdir()} == named_blobs(store)


def test_partial_downloads_are_kept_while_held_and_pruned_when_not(tmp_path):
    """A pull's partial download lives in `.weightkit/downloads/` under its download slot: prune keeps it while
    the slot is held, removes it (and the lock) once nobody holds it; transactions never sweep it."""
    store = Store(tmp_path)
    digest = "sha256:" + "ab" * 32
    with store.download_slot(digest) as prefix:
        data, state = prefix.with_name(prefix.name + ".data"), prefix.with_name(prefix.name + ".json")
        data.write_bytes(b"half")
        state.write_text("{}")
        with store.download_slot(digest, wait=False) as other:
            assert other is None  # held: a second puller waits
        report = store.prune()
        assert sorted(report.in_use) == [data, state] and report.removed == []
    with store.transaction():  # a transaction's sweep leaves it for the next pull to resume
        pass
    assert data.exists()
    report = store.prune(dry_run=True)
    assert sorted(report.removed, key=str) == sorted(
        [Removed(data, "partial", 4), Removed(state, "partial", 2)], key=str
    )
    assert data.exists()
    assert {r.kind for r in store.prune().removed} == {"partial"}
    assert list(store.downloads.iterdir()) == []
    with store.download_slot(digest) as prefix:  # a slot with nothing left behind cleans up its lock
        pass
    assert list(store.downloads.iterdir()) == []


def test_copy_keeps_the_manifest_bytes(tmp_path, small_gguf):
    store = Store(tmp_path)
    create_from_gguf(store, "a", small_gguf)
    store.copy("a", "example.com/team/b:v2")
    assert store.manifest_bytes("example.com/team/b:v2") == store.manifest_bytes("a")
    assert store.prune().removed == []


def orphan_blob(store: Store, data: bytes) -> Path:
    """A stored blob that no manifest names."""
    path = store.blob_path("sha256:" + hashlib.sha256(data).hexdigest())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_prune_removes_only_what_nobody_needs(tmp_path, small_gguf):
    store = Store(tmp_path)
    create_from_gguf(store, "kept", small_gguf)
    odd = store.manifests / "example.com" / "deep" / "er" / "team" / "model" / "tag"  # not a name weightkit parses
    odd.parent.mkdir(parents=True)
    with store.transaction() as tx:
        tx.write_manifest("scratch", Manifest(tx.add_bytes(b"{}", CONFIG), [tx.add_bytes(b"odd", MODEL)]))
    os.replace(store.manifest_path("scratch"), odd)
    orphan = orphan_blob(store, b"orphan")
    dead = "0123456789abcdef"
    (store.root / ".weightkit" / f"writer-{dead}.lock").touch()  # its writer died: nobody holds it
    dead_temps = [
        store.blobs / f"sha256-{dead}-0.partial",
        store.blobs / f".sha256-{dead}-1.partial.k2j4_x9a.tmp",  # atomic_write's, beside a temp file
        store.blobs / "sha256-ab_c1234.partial",  # weightkit before transactions
        store.manifest_path("kept").parent / ".latest.abcd1234.tmp",  # a manifest write cut short
    ]
    for path in dead_temps:
        path.write_bytes(b"x" * 10)
    foreign = [store.blobs / ("sha256-" + "1" * 64 + suffix) for suffix in ("-partial", "-partial-0")]  # Ollama's
    foreign.append(store.blobs / "notes.txt")
    for path in foreign:
        path.write_bytes(b"mine")

    dry = store.prune(dry_run=True)
    expected = sorted([*dead_temps, orphan])
    assert sorted(r.path for r in dry.removed) == expected and dry.bytes_freed == 40 + len(b"orphan")
    assert all(p.exists() for p in expected) and (store.root / ".weightkit" / f"writer-{dead}.lock").exists()
    report = store.prune()
    assert report.removed == dry.removed and report.in_use == [] and report.unreadable == []
    assert {r.kind for r in report.removed if r.path != orphan} == {"temp"}
    assert not any(p.exists() for p in expected) and all(p.exists() for p in foreign)
    assert {p.name for p in store.blobs.iterdir()} == named_blobs(store, odd) | {p.name for p in foreign}
    assert [p.name for p in (store.root / ".weightkit").iterdir()] == ["store.lock"]  # the dead writer's lock went
    assert store.verify("kept") == [] and store.prune().removed == []


def test_an_unreadable_manifest_keeps_every_blob(tmp_path, small_gguf):
    """A manifest that cannot be read could name any blob: prune and rm then remove none (temp files still go)."""
    store = Store(tmp_path)
    create_from_gguf(store, "a", small_gguf)
    create_from_gguf(store, "b", small_gguf)
    with store.transaction() as tx:
        tx.write_manifest("c", Manifest(tx.add_bytes(b"{}", CONFIG), [tx.add_bytes(b"c", MODEL)]))
    broken = store.manifest_path("broken")
    broken.parent.mkdir(parents=True)
    broken.write_text('{"layers": [')
    orphan = orphan_blob(store, b"orphan")
    temp = store.blobs / "sha256-ab_c1234.partial"
    temp.write_bytes(b"left")
    env = cli_env(OLLAMA_MODELS=str(store.root))
    r = run("prune", "--json", env=env)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "cannot read manifest" in r.stderr
    assert str(broken) in r.stderr and "Traceback" not in r.stderr
    doc = json.loads(r.stdout)
    assert doc["unreadable_manifests"] == [str(broken)] and [d["path"] for d in doc["removed"]] == [str(temp)]
    assert orphan.exists() and not temp.exists()
    before = set(store.blobs.iterdir())
    assert store.remove("c") == [] and set(store.blobs.iterdir()) == before  # c's blobs wait for a prune
    broken.unlink()
    assert {r.path.name for r in store.prune().removed} == {p.name for p in before} - named_blobs(store)


@pytest.mark.slow
def test_command_line_text(tmp_path, weightkit_cli):
    env = {"OLLAMA_MODELS": str(tmp_path / "store")}
    r = weightkit_cli("prune", env=env)
    assert r.returncode == 0 and "nothing to prune" in r.stdout and not (tmp_path / "store").exists()
    temp = tmp_path / "store" / "blobs" / "sha256-ab_c1234.partial"
    temp.parent.mkdir(parents=True)
    temp.write_bytes(b"x" * 2048)
    dry = weightkit_cli("prune", "--dry-run", env=env)
    assert "would remove" in dry.stdout and "blobs/sha256-ab_c1234.partial" in dry.stdout
    assert "1 file, would free 2.0 KiB" in dry.stdout and temp.exists()
    done = weightkit_cli("prune", env=env)
    assert done.returncode == 0 and "1 file, freed 2.0 KiB" in done.stdout and not temp.exists()


def test_without_flock(tmp_path, small_gguf, monkeypatch):
    """Where there is no fcntl (Windows), prune refuses and says why; create and rm work, touching no temp file."""
    monkeypatch.setattr(store_module, "fcntl", None)
    store = Store(tmp_path)
    store.blobs.mkdir(parents=True)
    temp = store.blobs / "sha256-ab_c1234.partial"
    temp.write_bytes(b"left")
    create_from_gguf(store, "m", small_gguf)
    assert store.verify("m") == [] and len(store.remove("m")) == 2
    assert [p.name for p in store.blobs.iterdir()] == [temp.name] and not (store.root / ".weightkit").exists()
    with pytest.raises(UnsupportedError, match="flock"):
        store.prune()
