"""Benchmark of the Docker runtime's warm pools on the real Docker Engine: the first command of
a new conversation served from the pool, against a command on a live conversation, with the
cold first command beside it for scale (docs/docker-runtime.md, "Warm pools").

Run from the repository root (engine as in ``bench_docker.py``)::

    .venv/bin/python tests/benchmarks/bench_pools.py [--runs 10]

Measured in one run, interleaved, medians:

1. **warm first command**: ``execute("true")`` of a new conversation whose runtime has
   ``pool_size=1`` (the pool refilled, untimed, before each run) against ``execute("true")`` on
   a live conversation. Target ≤ 1.3.
2. **cold first command** (``pool_size=0``) against the same live command: for scale.
3. **engine requests** of the warm first command against those of the live command (the
   claim's floor: the workspace ``PUT`` is the one request a claim adds; the claim itself and
   the record are store calls).
4. **claim alone**: :meth:`DockerPool.claim` and giving the member back (store calls only)
   against the live command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_common import Row
from bench_docker import TRUE, Bench, RequestCounter

from docker_engine import ensure_engine
from skillruntime.core.conversations import InMemoryConversationStore
from skillruntime.docker import DockerSkillRuntime
from skillruntime.docker.pool import close_pools


def _runtime(bench: Bench, store: InMemoryConversationStore, pool_size: int) -> DockerSkillRuntime:
    return DockerSkillRuntime(
        docker_host=bench.engine.host,
        image=bench.engine.image,
        conversation_id=f"{bench.run_id}-{uuid.uuid4().hex[:6]}",
        conversation_store=store,
        labels=bench.labels,
        pool_size=pool_size,
    )


def _first(runtime: DockerSkillRuntime) -> float:
    start = time.perf_counter()
    assert runtime.execute(TRUE).exit_code == 0
    return time.perf_counter() - start


def measure(runs: int) -> list[Row]:
    """The rows of one benchmark run."""
    bench = Bench(ensure_engine())
    store = InMemoryConversationStore()
    rows: list[Row] = []
    try:
        live = _runtime(bench, store, 0)
        live.execute(TRUE)  # image loaded, API version negotiated, user resolved
        live_times: list[float] = []
        warm_times: list[float] = []
        cold_times: list[float] = []
        warm_requests: list[int] = []
        live_requests: list[int] = []
        claim_times: list[float] = []
        for _ in range(runs):
            warm = _runtime(bench, store, 1)
            pool = warm.pool
            assert pool is not None
            assert pool.wait_ready(timeout=120)
            for _ in range(3):
                live_times.append(_first(live))
            with RequestCounter().counting() as counter:
                warm_times.append(_first(warm))
            warm_requests.append(counter.count)
            with RequestCounter().counting() as counter:
                live.execute(TRUE)
            live_requests.append(counter.count)
            assert warm.conversation_record is not None
            assert warm.conversation_record.sandbox_storage is not None, "not served warm"
            warm.destroy_conversation()
            warm.close()
            cold = _runtime(bench, store, 0)
            cold_times.append(_first(cold))
            cold.destroy_conversation()
            cold.close()
            assert pool.wait_ready(timeout=120)
            start = time.perf_counter()
            claimed = pool.claim("bench-claim")
            claim_times.append(time.perf_counter() - start)
            assert claimed is not None
            pool.give_back(claimed)
        live_seconds = statistics.median(live_times)
        rows.append(
            Row(
                "warm first command",
                statistics.median(warm_times),
                live_seconds,
                target=1.3,
                note='execute("true") on a live conversation',
            )
        )
        rows.append(
            Row(
                "cold first command",
                statistics.median(cold_times),
                live_seconds,
                note='execute("true") on a live conversation (for scale)',
            )
        )
        rows.append(
            Row(
                "warm first command, engine requests",
                statistics.median(warm_requests),
                statistics.median(live_requests),
                unit="requests",
                note="requests of the live command",
            )
        )
        rows.append(
            Row(
                "pool claim (store only)",
                statistics.median(claim_times),
                live_seconds,
                note='execute("true") on a live conversation',
            )
        )
        live.destroy_conversation()
        live.close()
    finally:
        close_pools()
        bench.close()
    return rows


def run(quick: bool) -> list[Row]:
    """The rows of this benchmark (interface of ``bench_common``)."""
    return measure(runs=2 if quick else 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    for row in measure(args.runs):
        print(
            f"{row.name}: {row.value:.4g} {row.unit} vs {row.baseline:.4g} {row.unit} "
            f"({row.note}); ratio {row.ratio:.3f}"
            + ("" if row.target is None else f", target <= {row.target:g}")
        )


if __name__ == "__main__":
    main()
