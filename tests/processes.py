"""What the tests see of processes, through /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def children(pid: int | str = "self") -> set[int]:
    """The pids of a process's children, whichever of its threads started them (none once it is gone)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids |= {int(p) for p in (task / "children").read_text().split()}
        except OSError:  # the thread ended meanwhile
            continue
    return pids


def alive(pid: int) -> bool:
    """Is the process running (not gone, and not a zombie waiting for whoever adopted it to reap it)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
