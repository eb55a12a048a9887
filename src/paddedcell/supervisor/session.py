"""One running command under Trio: pumps, exit, timeout, kill, input.

A command is finished when its leader has exited **and** its output is
drained. The drain is bounded (``supervisor.drain_seconds``, 2 s) because a
grandchild may keep the PTY slave or the pipe open for ever; after that we
close our end. EIO on a PTY master means every slave holder is gone: EOF.

Reads loop on ``os.read`` until EAGAIN and only then wait for readability;
waiting before every read costs an event-loop round trip per chunk.

A stream that masks secrets is read by a thread of its own (:mod:`.readahead`): a
PTY (~4 KiB per read) by :func:`.readahead.read_terminal`, a pipe by
:func:`.readahead.read_pipe`, which reads what is ready (up to ``REDACTED_BATCH``)
into the buffer of its filter slot and sanitizes and filters it in one call while
the command refills the enlarged pipe, batch after batch, with no event-loop turn
or ``wait_readable`` between batches: the loop only shows what the thread handed
over, so it answers routes meanwhile and the engine's scans (which release the
GIL) use the other core. ``supervisor.filter_threads`` slots bound the threads
that filter at once and the batch buffers, however many streams. Without a
secret the loop reads; plain ASCII without escapes, which needs no work, stays
on the loop, anything else goes to a worker (``trio.to_thread`` under a limiter
of ``filter_threads`` threads). A stream's batches are filtered in order, one at
a time; ``add_secrets`` waits for the batch in progress (a lock).

Kill: SIGTERM to the session's process tree (see :mod:`.procs`), then SIGKILL
to whatever is left after ``supervisor.kill_grace_seconds``, then reap.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import secrets as _secrets
import signal
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import trio

from .. import orphans
from ..execspec.ansi import OutputSanitizer, show_controls
from ..execspec.keys import CURSOR_POSITION_REPLY, CursorKeyTracker
from . import procs
from .buffers import OutputBuffer, complete_utf8_end, decode_tail
from .readahead import FilterSlots, Handoff, read_pipe, read_terminal
from .settings import SupervisorSettings
from .spawn import Spawned

from ..redactor.filters import OutputFilter, Passthrough, new_filter

log = logging.getLogger("paddedcell.supervisor")

#: Bytes per read on the loop (a stream without secrets). Small enough that 64
#: flooding sessions hold little in flight; large enough that per-chunk overhead
#: stays small at GB/s.
PIPE_READ_SIZE = 64 * 1024
PTY_READ_SIZE = 64 * 1024
#: A PTY reader thread's buffer: a little more than a Linux terminal holds (64 KiB of
#: flip buffers and the 4 KiB line discipline), so one read-until-EAGAIN takes it all.
#: In flight per PTY stream: this, and up to twice this handed over but not yet shown.
PTY_READ_AHEAD = 80 * 1024
#: The stdout pipe is enlarged to this: fewer wake-ups, and the pipe is a masking
#: stream's read-ahead (the command refills it while the worker filters the last batch).
#: Pipe pages count against the user's ``pipe-user-pages-soft`` (64 MiB; over it, an
#: unprivileged user's new pipes get two pages), so a process enlarges pipes only while
#: their total stays within :data:`PIPE_BUDGET`.
PIPE_SIZE = 512 * 1024
#: Bytes of enlarged pipes a process holds at once: a quarter of the soft limit (32
#: sessions streaming at once; the 33rd keeps the 64 KiB default, slower, correct).
PIPE_BUDGET = 16 * 1024 * 1024
#: Bytes a pipe's reader thread filters in one call before it hands the output to
#: the loop: one redactor feed per batch, what the pipe holds (128 MiB, 10 secrets, 7
#: alternated rounds, session 10: 512 KiB read straight from a 512 KiB pipe 0.63 GB/s
#: and 0.22 CPU s, 1 MiB 0.61 and 0.22, 2 MiB 0.22 and 0.61; a 256 KiB pipe with a
#: helper thread reading the next 512 KiB batch ahead, before, 0.50 and 0.30). The
#: buffer belongs to a filter slot: ``filter_threads`` of them, whatever the number of
#: sessions.
REDACTED_BATCH = PIPE_SIZE
#: Batches a pipe's reader filters before it looks whether another stream waits for
#: its slot (and gives the slot up if so) and whether it was told to stop.
BATCHES_PER_TURN = 8
#: A pipe's reader wakes the loop once this much filtered output is queued (and when
#: it gives its slot up), not at every batch, and waits once ``HANDOFF_LIMIT`` is
#: unshown (back-pressure). It gives the slot up only once all of it was shown: in
#: flight per filter slot, this and one batch, not per stream.
HANDOFF_WAKE_AT = 2 * REDACTED_BATCH
HANDOFF_LIMIT = 4 * REDACTED_BATCH
F_SETPIPE_SZ = 1031

OutputCallback = Callable[[str, bytes], None]



@dataclass(frozen=True, slots=True)
class Outcome:
    """How a command ended, before :mod:`paddedcell.execspec.results` shapes it.

    ``status`` is ``completed`` (exited), ``failed`` (signal or timeout) or
    ``killed`` (ended at the agent's request); ``exit_reason`` is one of
    ``exit``, ``signal``, ``overall-timeout``, ``manual-cancel``.
    """

    status: str
    exit_code: int | None
    exit_signal: str | None
    signal_number: int | None
    exit_reason: str
    timed_out: bool
    duration_ms: int


def classify(exit_code: int | None, signum: int | None, *, timed_out: bool,
             killed: bool) -> tuple[str, str]:
    """``(status, exit_reason)`` of a finished command."""
    if timed_out:
        return "failed", "overall-timeout"
    if killed:
        return "killed", "manual-cancel"
    if signum is not None:
        return "failed", "signal"
    if exit_code in (126, 127):
        return "failed", "exit"
    return "completed", "exit"


_FILTER_LIMITER: trio.lowlevel.RunVar = trio.lowlevel.RunVar("paddedcell_filter_limiter")
_FILTER_SLOTS: trio.lowlevel.RunVar = trio.lowlevel.RunVar("paddedcell_filter_slots")


def _per_run(var: trio.lowlevel.RunVar, make: Callable[[], Any]) -> Any:
    """``var``'s value in this Trio run, made by ``make`` the first time."""
    try:
        return var.get()
    except LookupError:
        value = make()
        var.set(value)
        return value


def _filter_limiter(settings) -> trio.CapacityLimiter:
    """The worker threads that sanitize and filter output (one set per Trio run)."""
    threads = max(1, SupervisorSettings.of(settings).filter_threads)
    return _per_run(_FILTER_LIMITER, lambda: trio.CapacityLimiter(threads))


def _filter_slots(settings) -> FilterSlots:
    """Held by a reader thread (a terminal's, a masking pipe's) while it reads and
    filters (one set per Trio run): ``supervisor.filter_threads`` at once, however many
    streams, so that few threads compete with the event loop for the GIL; a pipe's
    batch buffer comes with its slot (``REDACTED_BATCH`` bytes per slot, not per stream)."""
    threads = max(1, SupervisorSettings.of(settings).filter_threads)
    return _per_run(_FILTER_SLOTS, lambda: FilterSlots(threads, REDACTED_BATCH))


class Session:
    """A started command. Created by :class:`~.supervisor.Supervisor`."""

    def __init__(self, *, session_id: str, agent_id: str | None, session_key: str | None,
                 agent_workspace: str | None = None, command: str,
                 display_command: str, cwd: str, use_pty: bool, spawned: Spawned,
                 tree: procs.ProcessTree, buffer: OutputBuffer, redactor: OutputFilter | None,
                 settings, timeout_seconds: float, name: str | None,
                 on_output: OutputCallback | None = None,
                 cgroup: procs.CgroupScope | None = None):
        self.id = session_id
        self.agent_id = agent_id
        self.session_key = session_key
        #: The agent's workspace: what its commands act in (``session.protocol.bind``).
        self.agent_workspace = agent_workspace
        #: The command with secrets masked: what lists, logs and audit show.
        self.command = display_command
        self.name = name or display_command
        self.cwd = cwd
        self.pty = use_pty
        self.spawned = spawned
        self.pid = spawned.proc.pid
        self.tree = tree
        self.cgroup = cgroup
        self.buffer = buffer
        self.settings = settings
        self.limits = SupervisorSettings.of(settings)
        self.timeout_seconds = timeout_seconds
        self.on_output = on_output
        self.started_at = time.time()
        self._started_monotonic = time.monotonic()
        self.ended_at: float | None = None
        self.last_output_at: float | None = None
        self.backgrounded = False
        #: Lines shown before the output in exec results (e.g. the PTY fallback).
        self.warnings: list[str] = []
        #: The session's egress side (``egress.session.ProxySession``) when its proxy
        #: intercepts for bound secrets: the channel answers placeholders from it.
        self.egress: Any = None
        #: ``process remove`` on a running session: dropped as soon as it ends.
        self.removed = False
        #: A poll showed the model this session's end (no exit notification then).
        self.exit_polled = False
        #: Cursor-key mode for send-keys; answers cursor-position queries like OpenClaw.
        self.cursor = CursorKeyTracker(mode="unknown" if use_pty else "normal")
        self.outcome: Outcome | None = None
        self.poll_cursor = 0
        #: Polls in a row without new output (``retryInMs``); None before the first.
        self.poll_count: int | None = None
        self.done = trio.Event()
        #: Set (and replaced) at each new output and at the leader's exit: what a
        #: waiting poll waits for (:meth:`wait_for_news`).
        self._news = trio.Event()
        self._kill_done: trio.Event | None = None
        self._kill_reason: str | None = None
        self._timed_out = False
        self._status: int | None = None
        self._open_pumps = 0
        self._pumps_done = trio.Event()
        self._closed_fds: set[int] = set()
        self._write_lock = trio.Lock()
        self.stdin_closed = spawned.stdin is None and spawned.pty_master is None
        # Pipes: one for stdout and stderr together unless the caller asked for two.
        streams = (["pty"] if use_pty else
                   ["stdout"] if spawned.stderr is None else ["stdout", "stderr"])
        #: OpenClaw's output sanitizer, one per stream and BEFORE the redactor:
        #: escape sequences go, controls become ``\xNN`` (see execspec.ansi).
        self._sanitizers = {name: OutputSanitizer(self._on_csi if name == "pty" else None)
                            for name in streams}
        if redactor is None:
            redactor = new_filter((), settings)
        # One fresh stream each, sharing the built matcher.
        self._redactors: dict[str, OutputFilter] = {name: redactor.fresh() for name in streams}
        #: Held by the worker filtering a read, and by add_secrets.
        self._filter_lock = threading.Lock()

    def add_secrets(self, values: list[str]) -> None:
        """Mask these too from the next byte on: a value the supervisor handed to
        this session mid-run (``pass_mgr get/generate/rotate`` over its channel)."""
        values = [v for v in values if v]
        if not values or not self._redactors:
            return
        with self._filter_lock:  # not while a worker filters a read with the old set
            for redactor in self._redactors.values():
                redactor.add_secrets(values)

    # --- state ------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.outcome is None

    @property
    def status(self) -> str:
        return "running" if self.outcome is None else self.outcome.status

    # Output is read as text with its control characters shown as ``\xNN``
    # (OpenClaw's sanitizer; the ring holds them raw, see execspec.ansi).

    def text(self) -> tuple[str, bool]:
        """``(aggregated, truncated)``: the last max_aggregated_chars of the output."""
        limit = self.limits.max_aggregated_chars
        held = self.buffer.tail(limit * 4)
        complete = self.buffer.start == 0 and len(held) == len(self.buffer)
        text, truncated = decode_tail(held, limit, complete=complete)
        return show_controls(text), truncated

    def truncated(self) -> bool:
        """``text()[1]`` without building the text (``list`` shows only the flag): the
        answer follows from the ring's size unless the whole output is just over the cap."""
        limit = self.limits.max_aggregated_chars
        if self.buffer.start > 0 or len(self.buffer) > limit * 4:
            return True  # text() sees an incomplete tail: always truncated
        if len(self.buffer) <= limit:
            return False  # at most one character per byte
        return self.text()[1]

    def tail(self) -> str:
        limit = self.limits.tail_chars
        data = self.buffer.tail(limit * 4)
        complete = self.buffer.start == 0 and len(data) == len(self.buffer)
        return show_controls(decode_tail(data, limit, complete=complete)[0])

    def peek_new_output(self) -> tuple[str, bool, int]:
        """Output since the last poll, whether part of it was dropped, and the
        cursor to :meth:`take_output` once it was delivered.

        Capped like OpenClaw's pending buffer (the tail is kept); output evicted
        from the ring before it was polled also counts as dropped.
        """
        data = self.buffer.read(self.poll_cursor)
        if self.running:
            data = data[:complete_utf8_end(data)]
        cut = self.poll_cursor < self.buffer.start
        cursor = max(self.poll_cursor, self.buffer.start) + len(data)
        limit = self.limits.pending_max_chars
        text, dropped = decode_tail(data, limit, complete=not cut)
        text = show_controls(text)
        return text, dropped, cursor

    def take_output(self, cursor: int) -> None:
        """A poll delivered the output up to ``cursor``."""
        self.poll_cursor = max(self.poll_cursor, cursor)

    def has_new_output(self) -> bool:
        return self.poll_cursor < self.buffer.end

    async def wait_for_news(self, seconds: float) -> None:
        """Return at the first output no poll has taken yet, when the command's leader
        exits or ends, or after ``seconds``, whichever comes first.

        Output is appended and the exit recorded in this event loop, and nothing awaits
        between the check and the wait, so an arrival is never missed: it either shows
        in the check or sets the event waited on.
        """
        with trio.move_on_after(seconds):
            while self.running and not self.exited and not self.has_new_output():
                self._news = trio.Event()
                await self._news.wait()

    def _tell_news(self) -> None:
        self._news.set()

    @property
    def exited(self) -> bool:
        """The command's leader has exited (its output may still be draining)."""
        return self._status is not None

    # --- running ------------------------------------------------------------

    async def run(self) -> None:
        """Pump, wait, time out, drain, finish. Never raises for the command's sake."""
        try:
            async with trio.open_nursery() as nursery:
                sources = ([("pty", self.spawned.pty_master)] if self.pty else
                           [(name, fd) for name, fd in (("stdout", self.spawned.stdout),
                                                        ("stderr", self.spawned.stderr))
                            if fd is not None])
                self._open_pumps = len(sources)
                for stream, fd in sources:
                    nursery.start_soon(self._pump, stream, fd)
                timeout_scope = trio.CancelScope()
                if self.timeout_seconds and self.timeout_seconds > 0:
                    nursery.start_soon(self._timeout_watch, timeout_scope)
                await self._wait_exit()
                if self._kill_done is None:
                    timeout_scope.cancel()  # exited in time: a slow drain is no timeout
                with trio.move_on_after(self.limits.drain_seconds):
                    await self._pumps_done.wait()
                if self._kill_done is not None:
                    with trio.CancelScope(shield=True):
                        await self._kill_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if self._status is None:
                    # We are being cancelled (daemon stopping): end the tree first.
                    await self._terminate_tree()
                    if self._status is None:
                        await self._wait_exit()
                self._finish()

    def _filter(self, stream: str, data: bytes) -> bytes:
        """Sanitize and filter one read (in a worker thread unless it is trivial)."""
        with self._filter_lock:
            redactor = self._redactors.get(stream)
            if redactor is None:  # finished meanwhile: nothing more is shown
                return b""
            return redactor.feed(self._sanitizers[stream].feed(data))

    def _masking(self, stream: str) -> bool:
        """This stream masks secrets: its reads go to a worker
        (:meth:`_read_and_filter_batches`)."""
        redactor = self._redactors.get(stream)
        return redactor is not None and not (isinstance(redactor, Passthrough) and redactor.idle)

    def _trivial(self, stream: str, data: bytes) -> bool:
        """No work worth a thread: nothing to mask, and ASCII the sanitizer passes as is."""
        redactor = self._redactors.get(stream)
        return (isinstance(redactor, Passthrough) and redactor.idle and data.isascii()
                and b"\x1b" not in data)

    async def _pump(self, stream: str, fd: int) -> None:
        redactor = self._redactors[stream]
        size = PTY_READ_SIZE if self.pty else PIPE_READ_SIZE
        limiter = _filter_limiter(self.settings)
        enlarged = _enlarge_pipe(fd) if stream == "stdout" else 0
        try:
            while True:
                if self._masking(stream):
                    # Secrets to mask: the stream's own reader thread from now on.
                    await self._read_in_own_thread(stream, fd)
                    break
                # A PTY hands out at most one 4 KiB line-discipline buffer per
                # read: gather what is ready so the per-chunk work runs once.
                chunks, got, eof, drained = [], 0, False, False
                while got < size:
                    try:
                        data = os.read(fd, size)
                    except BlockingIOError:
                        drained = True
                        break
                    except OSError as exc:
                        if exc.errno != errno.EIO:  # PTY: EIO = every slave holder is gone
                            raise
                        data = b""
                    if not data:
                        eof = True
                        break
                    chunks.append(data)
                    got += len(data)
                    if not self.pty:
                        break
                if chunks:
                    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                    # Nothing is read while a worker filters this read, so a
                    # child that outruns us fills its pipe and blocks
                    # (back-pressure); the loop meanwhile serves everything else.
                    if self._trivial(stream, data):
                        shown = self._filter(stream, data)
                    else:
                        shown = await trio.to_thread.run_sync(self._filter, stream, data,
                                                              limiter=limiter)
                    self._emit(stream, shown)
                if eof:
                    break
                if drained:  # nothing more yet: waiting is the checkpoint
                    await trio.lowlevel.wait_readable(fd)
                else:
                    await trio.lowlevel.checkpoint()
        finally:
            _give_back_pipe(enlarged)  # first: nothing below may keep it from the budget
            with self._filter_lock:
                rest = self._sanitizers[stream].flush()
                last = self._redactors.get(stream, redactor)
                self._emit(stream, (last.feed(rest) if rest else b"") + last.flush())
            self._open_pumps -= 1
            if self._open_pumps == 0:
                self._pumps_done.set()

    async def _read_in_own_thread(self, stream: str, fd: int) -> None:
        """A masking stream: its own thread reads what is ready, filters it and hands
        it to the loop (:func:`.readahead.read_terminal` for a PTY,
        :func:`.readahead.read_pipe` for a pipe: batches of up to ``REDACTED_BATCH``
        into its slot's buffer, one loop wake-up per ``HANDOFF_WAKE_AT`` bytes, a wait
        once ``HANDOFF_LIMIT`` is unshown); cancelling (kill, timeout, the drain's
        deadline, the daemon stopping) wakes and ends the thread before the session
        closes the descriptor. Its own thread, not the filter limiter's: it waits in
        ``poll`` for as long as the stream is quiet."""
        stop_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        slots = _filter_slots(self.settings)
        if self.pty:
            work = partial(read_terminal, fd, stop_fd, memoryview(bytearray(PTY_READ_AHEAD)),
                           partial(self._filter, stream),
                           Handoff(partial(self._emit, stream), PTY_READ_AHEAD), slots)
        else:
            work = partial(read_pipe, fd, stop_fd, slots, partial(self._filter, stream),
                           Handoff(partial(self._emit, stream), HANDOFF_LIMIT,
                                   wake_at=HANDOFF_WAKE_AT), BATCHES_PER_TURN)

        async def stop_when_cancelled() -> None:
            try:
                await trio.sleep_forever()
            finally:
                os.eventfd_write(stop_fd, 1)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_when_cancelled)
                await trio.to_thread.run_sync(work, limiter=trio.CapacityLimiter(1))
                nursery.cancel_scope.cancel()
        finally:
            os.close(stop_fd)

    def _on_csi(self, sequence: str) -> None:
        """A CSI in PTY output (OpenClaw's sanitizer callback): follow the
        cursor-key mode, answer cursor-position queries (programs hang without)."""
        if sequence in ("?1h", "?1l"):
            self.cursor.mode = "application" if sequence == "?1h" else "normal"
        elif sequence in ("6n", "?6n") and self.spawned.pty_master is not None:
            try:
                os.write(self.spawned.pty_master, CURSOR_POSITION_REPLY)
            except OSError:
                pass

    def _emit(self, stream: str, data: bytes) -> None:
        if not data:
            return
        self.buffer.append(data)
        self.last_output_at = time.time()
        self._tell_news()
        # No cursor-key tracking here: the sanitizer removed every escape
        # sequence before the redactor and reported each CSI to _on_csi.
        if self.on_output is not None:
            self.on_output(stream, data)

    async def _wait_exit(self) -> None:
        pid = self.pid
        try:
            pidfd = os.pidfd_open(pid)
        except (OSError, AttributeError):
            pidfd = None
        try:
            while True:
                try:
                    got, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    # Reaped elsewhere (a waitpid(-1) somewhere): the status is lost.
                    log.warning("session %s: pid %d was reaped by someone else; its exit "
                                "status is lost and reported as 0", self.id, pid)
                    got, status = pid, 0
                if got:
                    orphans.release(pid)
                    break
                if pidfd is not None:
                    await trio.lowlevel.wait_readable(pidfd)
                else:
                    await trio.sleep(0.02)
        finally:
            if pidfd is not None:
                trio.lowlevel.notify_closing(pidfd)
                os.close(pidfd)
        self._status = status
        self._tell_news()
        code, _ = procs.exit_status(status)
        self.spawned.proc.returncode = code if code is not None else -os.WTERMSIG(status)
        self.tree.leader_reaped = True

    async def _timeout_watch(self, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(self.timeout_seconds)
        if scope.cancelled_caught:
            return
        self._timed_out = True
        await self.kill("overall-timeout")

    async def kill(self, reason: str = "manual-cancel") -> None:
        """TERM → grace → KILL the whole tree; returns when it is done."""
        if self._kill_done is None:
            self._kill_done = trio.Event()
            self._kill_reason = reason
            try:
                with trio.CancelScope(shield=True):
                    await self._terminate_tree()
            finally:
                self._kill_done.set()
        else:
            await self._kill_done.wait()

    async def _terminate_tree(self) -> None:
        grace = self.limits.kill_grace_seconds
        self.tree.signal(signal.SIGTERM)
        if self.pty and self.spawned.pty_master is not None and self.spawned.pty_master not in self._closed_fds:
            # A job stopped with C-z would not see SIGTERM until continued.
            self.tree.signal(signal.SIGCONT)
        deadline = trio.current_time() + grace
        while trio.current_time() < deadline:
            table = procs.scan()
            self.tree.refresh(table, os.getpid())
            if not self.tree.live(table):
                break
            await trio.sleep(0.05)
        table = procs.scan()
        if self.tree.live(table):
            self.tree.signal(signal.SIGKILL, table)
        if self.cgroup is not None:
            self.cgroup.kill()
        # SIGKILL cannot be ignored: wait briefly for the survivors to vanish, reaping orphans.
        for _ in range(40):
            table = procs.scan()
            procs.reap_orphans([self.tree], table, os.getpid())
            if not self.tree.live(table):
                break
            await trio.sleep(0.025)

    def _finish(self) -> None:
        if self.outcome is not None:
            return
        for fd in self.spawned.fds:
            self._close_fd(fd)
        status = self._status if self._status is not None else 0
        code, signum = procs.exit_status(status)
        state, exit_reason = classify(code, signum, timed_out=self._timed_out,
                                      killed=self._kill_reason == "manual-cancel")
        self.ended_at = time.time()
        # No copy of the text here: finished sessions keep only their ring buffer,
        # which the budget counts; ``text()`` decodes it when asked.
        self.outcome = Outcome(
            status=state, exit_code=code, exit_signal=procs.signal_name(signum) if signum else None,
            signal_number=signum, exit_reason=exit_reason, timed_out=self._timed_out,
            duration_ms=int((time.monotonic() - self._started_monotonic) * 1000))
        self.stdin_closed = True
        self._redactors.clear()  # drop the secret set with them
        if self.cgroup is not None:
            self.cgroup.remove()
        self.done.set()
        self._tell_news()

    def _close_fd(self, fd: int | None) -> None:
        if fd is None or fd in self._closed_fds:
            return
        self._closed_fds.add(fd)
        try:
            trio.lowlevel.notify_closing(fd)
        except Exception:
            pass
        try:
            os.close(fd)
        except OSError:
            pass

    # --- input ----------------------------------------------------------------

    @property
    def stdin_writable(self) -> bool:
        return self.running and not self.stdin_closed

    async def write(self, data: bytes, eof: bool = False) -> None:
        """Send bytes to the command's terminal or stdin pipe; ``eof`` closes stdin.

        Writes queue: each one reaches the command whole and in call order
        (two tasks waiting on one fd would interleave, and trio refuses that).
        """
        async with self._write_lock:
            await self._write(data, eof)

    async def _write(self, data: bytes, eof: bool) -> None:
        fd = self.spawned.pty_master if self.pty else self.spawned.stdin
        if fd is None or not self.stdin_writable:
            raise BrokenPipeError("stdin is not writable")
        view = memoryview(data)
        while view:
            try:
                sent = os.write(fd, view)
                view = view[sent:]
            except BlockingIOError:
                try:
                    await trio.lowlevel.wait_writable(fd)
                except trio.ClosedResourceError:
                    # The session ended (and closed the fd) while we waited.
                    raise BrokenPipeError("stdin is not writable") from None
        if eof:
            if self.pty:
                os.write(fd, b"\x04")  # VEOF: the terminal's end of input
            else:
                self._close_fd(fd)
                self.spawned.fds.remove(fd)
                self.stdin_closed = True


_pipe_bytes = 0  # enlarged pipe bytes held now (PIPE_BUDGET)
_pipe_lock = threading.Lock()


def _enlarge_pipe(fd: int) -> int:
    """Enlarge the pipe ``fd`` to ``PIPE_SIZE`` if the budget allows: the bytes it now
    counts against :data:`PIPE_BUDGET` (0: left as it was; a PTY is no pipe)."""
    global _pipe_bytes
    with _pipe_lock:
        if _pipe_bytes + PIPE_SIZE > PIPE_BUDGET:
            return 0
        try:
            size = fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
        except OSError:  # not a pipe, or the user's pipe pages are spent (EPERM)
            return 0
        _pipe_bytes += size
        return size


def _give_back_pipe(size: int) -> None:
    global _pipe_bytes
    with _pipe_lock:
        _pipe_bytes -= size


def new_session_id() -> str:
    """128 random bits, URL-safe (docs/design.md §4.2), never starting with "-": a command
    line reads that as an option (`paddedcell process log -x…` was a usage error 1 time
    in 64). Drawing again keeps every id equally likely among those allowed."""
    while True:
        session_id = _secrets.token_urlsafe(16)
        if not session_id.startswith("-"):
            return session_id
