"""A masking pump's memory: what the supervisor's malloc settings must leave alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from paddedcell.supervisor import Supervisor, procs, session

from supervisor_helpers import make_settings


def test_a_batchs_blocks_stay_below_the_pinned_mmap_threshold():
    # The redactor's scan buffer (its held tail + the batch), its line-break view and its
    # output come from the heap, reused, not as fresh mappings faulted in page by page
    # (at 128 KiB: 131,000 faults and 3x the CPU for 128 MiB): raising REDACTED_BATCH
    # means raising the threshold too.
    assert session.REDACTED_BATCH + 64 * 1024 <= procs.PINNED_MMAP_THRESHOLD
    assert procs.pin_malloc_thresholds.__defaults__ == (procs.PINNED_MMAP_THRESHOLD,
                                                        procs.PINNED_TRIM_THRESHOLD,
                                                        procs.PINNED_ARENA_MAX)


def test_the_heap_top_keeps_a_few_batches_free():
    # A worker frees a batch's blocks while the loop frees older outputs: at a trim
    # threshold of 4 batches (2 MiB) the heap top was given back and faulted in again
    # every few batches (7,500-11,800 faults for 128 MiB against 2,800-4,000 at 8 batches).
    assert procs.PINNED_TRIM_THRESHOLD >= 8 * session.REDACTED_BATCH


def test_pinned_threads_share_a_few_malloc_arenas():
    """Each thread's first malloc makes it an arena of its own (up to 8 a core) unless
    the arenas are capped: 16 threads holding 200 KiB blocks (heap, not mmap) show at most
    PINNED_ARENA_MAX arenas in glibc's malloc_stats after pin_malloc_thresholds, more
    without it."""
    script = (
        "import sys, threading, ctypes\n"
        "from paddedcell.supervisor import procs\n"
        "if sys.argv[1] == 'pin': assert procs.pin_malloc_thresholds()\n"
        "held, go = [], threading.Barrier(17)\n"
        "def work():\n"
        "    held.append(bytearray(200 * 1024)); go.wait(); go.wait()\n"
        "threads = [threading.Thread(target=work) for _ in range(16)]\n"
        "[t.start() for t in threads]; go.wait()\n"
        "ctypes.CDLL(None).malloc_stats()\n"
        "go.wait(); [t.join() for t in threads]\n")
    arenas = {}
    for mode in ("pin", "default"):
        out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True,
                             check=True, env={k: v for k, v in os.environ.items()
                                              if k != "MALLOC_ARENA_MAX"})
        arenas[mode] = out.stderr.count("Arena ")
    assert 1 <= arenas["pin"] <= procs.PINNED_ARENA_MAX < arenas["default"], arenas


async def test_every_supervisor_pins_the_malloc_thresholds(tmp_path, nursery, monkeypatch):
    # Not only the daemon: a foreground pcexec's supervisor (and the in-process benchmark)
    # pumps the same batches.
    pinned = []
    monkeypatch.setattr(procs, "pin_malloc_thresholds", lambda *a: pinned.append(a) or True)
    Supervisor(make_settings(tmp_path / "home", supervisor__sandbox="none"), nursery)
    assert pinned == [()]
