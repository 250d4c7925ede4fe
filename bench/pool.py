"""A fixed set of worker processes (multiprocessing 'spawn'), reused for every drain.

Besides wall time and per-claim latency, a drain records two costs that noise from other
processes on the machine barely touches: CPU seconds spent (the workers' own, and their
PostgreSQL backends' from /proc when the server is local) and WAL bytes written.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

from bench import loops

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_cpu(pid: int) -> float | None:
    """utime + stime of a local process in seconds, or None (remote server, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def _is_postgres(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"postgres" in fh.read()
    except OSError:
        return False


class DrainFailed(RuntimeError):
    pass


def stop_workers(pipes, procs) -> None:
    """Ask each worker process to stop, then join it (terminating only our own children)."""
    for pipe in pipes:
        try:
            pipe.send(("stop",))
        except (BrokenPipeError, OSError):
            pass
    for pipe, proc in zip(pipes, procs, strict=True):
        try:
            if pipe.poll(10):
                pipe.recv()
        except (EOFError, OSError):
            pass
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()  # only our own child, by its handle


class WorkerPool:
    def __init__(self, size: int, *, local_server: bool):
        ctx = mp.get_context("spawn")
        self.pipes = []
        self.procs = []
        self.backend_pids: list[int] = []
        self.local_server = local_server
        for i in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=loops.worker_main, args=(child, i), daemon=True, name=f"bench-worker-{i}"
            )
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)
        for pipe in self.pipes:
            msg = pipe.recv()
            assert msg[0] == "hello", msg
            self.backend_pids.append(msg[1])
        # A backend pid is only ours to read if that local process is a postgres backend
        # (a remote DATABASE_URL server's pids mean nothing here).
        self.local_server = local_server and all(_is_postgres(p) for p in self.backend_pids)

    def _server_cpu(self, workers: int) -> float | None:
        if not self.local_server:
            return None
        values = [_proc_cpu(pid) for pid in self.backend_pids[:workers]]
        return None if any(v is None for v in values) else sum(values)

    def drain(
        self,
        loop: str,
        workers: int,
        endpoint_id: int,
        heartbeat: bool,
        variant: str = "baseline",
        wal_lsn=None,
    ) -> dict:
        """Run one drain on the first ``workers`` processes; returns the merged stats.
        ``wal_lsn`` is a callable returning the server's current WAL position in bytes."""
        pipes = self.pipes[:workers]
        for pipe in pipes:
            pipe.send(("prepare", loop, endpoint_id, heartbeat, variant))
        problems = []
        for pipe in pipes:
            msg = pipe.recv()
            if msg[0] == "error":
                problems.append(msg[1])
            else:
                assert msg[0] == "ready", msg
        if problems:
            raise DrainFailed(f"{loop}/{variant}: {problems[0]}")
        wal0 = wal_lsn() if wal_lsn else None
        server0 = self._server_cpu(workers)
        t0 = time.perf_counter()
        for pipe in pipes:
            pipe.send(("go",))
        results = [pipe.recv()[1] for pipe in pipes]
        server1 = self._server_cpu(workers)
        wal1 = wal_lsn() if wal_lsn else None
        errors = [r["error"] for r in results if r["error"]]
        if errors:
            raise DrainFailed(f"{loop}/{variant} drain failed: {errors[0]}")
        end = max(r["end"] for r in results)
        n = sum(r["n"] for r in results)
        wall = end - t0
        return {
            "n": n,
            "wall": wall,
            "per_s": n / wall if wall > 0 else 0.0,
            "lat": [x for r in results for x in r["lat"]],
            "hb_lat": [x for r in results for x in r["hb_lat"]],
            "per_worker": [r["n"] for r in results],
            "client_cpu": sum(r["cpu"] for r in results),
            "server_cpu": None if server0 is None or server1 is None else server1 - server0,
            "wal_bytes": None if wal0 is None or wal1 is None else wal1 - wal0,
        }

    def close(self) -> None:
        stop_workers(self.pipes, self.procs)
