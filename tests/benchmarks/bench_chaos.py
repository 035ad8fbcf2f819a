"""Chaos benchmark: three node processes, one PostgreSQL, one Docker Engine, nodes killed.

Issue 48, part 3. Run from the repository root::

    .venv/bin/python tests/benchmarks/bench_chaos.py                       # 60 conversations, 2 min
    .venv/bin/python tests/benchmarks/bench_chaos.py --docker-host tcp://127.0.0.1:2375 \\
        --conversations 60 --duration 120 --ttl 5

What one run does:

* A fresh PostgreSQL database on the local server (``tests/sql_databases.py``: 127.0.0.1:5432,
  trust auth), its schema created, dropped at the end.
* Three **node** processes (this file with ``--node``, separate OS processes started with
  ``subprocess``). Each opens one ``SqlConversationStore`` on that database and, per
  conversation it is sent, one ``DockerSkillRuntime(conversation_id=…, conversation_store=store,
  exclusive=True, lease_ttl_seconds=--ttl)`` on the engine (``--docker-host``, else
  ``DOCKER_HOST`` or the suite's engine), and runs steps with a pool of worker threads.
* The **driver** (this process) owns every conversation's script: steps 1..``--steps``. It sends
  step ``n`` of a conversation to a random live node and sends ``n + 1`` only after the node
  acknowledged ``n`` — which a node does only after ``execute`` returned, exit code 0. A step is
  one exclusive command that, in the conversation's workspace,

  1. takes an atomic ``mkdir .chaos-lock`` (failing means another command of the conversation
     runs: it appends to ``overlaps.log``) and appends ``start n node`` to ``fence.log``;
  2. appends ``n`` to ``steps.txt`` **only if its last line is ``n - 1``** — a step whose command
     ran but whose acknowledgement was lost (its node was killed after the command returned)
     is sent again to another node and finds its line there: it answers ``already`` and is
     acknowledged, so a lost ack never duplicates a line. Any other last line is an anomaly;
  3. sleeps ``--step-sleep`` seconds, appends ``end n node`` and removes the lock.

* A **chaos loop** ``SIGKILL``\\ s a random node every ``--kill-every`` seconds (jittered ±50 %)
  for ``--duration`` seconds and starts a new process in its place. The steps outstanding on the
  killed node go to the other nodes. The **takeover time** of a conversation is from the kill to
  the first acknowledgement of its outstanding step by another node; when the killed node held
  the conversation's lease (its command was in flight) that wait includes the lease's expiry,
  so it is compared with the lease TTL (target p99 ≤ TTL + 2 s).

At the end (after the scripts finish): every ``steps.txt`` is exactly ``1..steps`` (0 lost, 0
duplicated, in order — an unacknowledged step may be present at most once, and since every
script runs to its end every step is eventually acknowledged), ``overlaps.log`` is absent and
the fence log never has two starts without an end between them, every conversation finished,
the engine holds exactly one container and one volume per conversation with the run's label,
no lease is held; then every conversation is destroyed and nothing with the label is left.

Rows (``run(quick)``): takeover p50 and p99 against the lease TTL (target ≤ (TTL + 2 s) / TTL
for p99), and the counts of lost or duplicated acknowledged steps, overlaps, leaked containers
and volumes, held leases and unfinished conversations, each as ``count + 1`` against 1 (target
ratio ≤ 1, i.e. zero). Quick mode: 6 conversations, 6 steps, one kill, TTL 2 s, on the suite's
engine (whatever ``DOCKER_HOST`` it sets).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))

from bench_common import Row  # noqa: E402

RUN_LABEL = "skillruntime-chaos"


# ---------------------------------------------------------------- the step command


def step_command(step: int, node: str, sleep_seconds: float) -> str:
    """The shell command of step ``step`` (see the module docs): idempotent by number."""
    previous = "" if step == 1 else str(step - 1)
    return (
        "if ! mkdir .chaos-lock 2>/dev/null; then "
        f"echo 'overlap {step} {node}' >> overlaps.log; fi; "
        f"echo 'start {step} {node}' >> fence.log; "
        "read up rest < /proc/uptime; "
        "last=$(tail -n 1 steps.txt 2>/dev/null); "
        f"if [ \"$last\" = '{previous}' ]; then echo {step} >> steps.txt; r=appended; "
        f'elif [ "$last" = \'{step}\' ]; then r=already; else r="bad:$last"; fi; '
        f"sleep {sleep_seconds}; "
        f"echo 'end {step} {node}' >> fence.log; "
        "rmdir .chaos-lock 2>/dev/null; "
        'echo "$r $up"'
    )


def fence_overlaps(fence: str) -> int:
    """Starts in a fence log that come while another command of the conversation runs."""
    running = 0
    overlaps = 0
    for line in fence.splitlines():
        if line.startswith("start "):
            if running:
                overlaps += 1
            running += 1
        elif line.startswith("end "):
            running = max(0, running - 1)
    return overlaps


# ---------------------------------------------------------------- a node process


def _runtime(args: argparse.Namespace, store: Any, conversation: str) -> Any:
    from skillruntime.docker import DockerSkillRuntime

    return DockerSkillRuntime(
        docker_host=args.docker_host,
        image=args.image,
        conversation_id=conversation,
        conversation_store=store,
        exclusive=True,
        lease_ttl_seconds=args.ttl,
        lease_wait_seconds=max(60.0, 6 * args.ttl),
        labels={RUN_LABEL: args.run_id},
    )


def node_main(args: argparse.Namespace) -> int:
    """Serve steps read from stdin (JSON lines) until ``quit``; answer on stdout."""
    from skillruntime.core.conversations import open_conversation_store
    from skillruntime.core.models import SkillExecutionRequest

    store = open_conversation_store(args.url, pool_size=args.workers, max_overflow=4)
    runtimes: dict[str, Any] = {}
    runtimes_lock = threading.Lock()
    # When each step's lease was granted (the keeper asks in the thread running the step).
    granted = threading.local()
    acquire_lease = store.acquire_lease

    def acquire_and_note(*arguments: Any, **options: Any) -> Any:
        lease = acquire_lease(*arguments, **options)
        if lease is not None and getattr(granted, "at", None) is None:
            granted.at = time.clock_gettime(time.CLOCK_BOOTTIME)
        return lease

    store.acquire_lease = acquire_and_note  # type: ignore[method-assign]
    out_lock = threading.Lock()

    def say(message: dict[str, Any]) -> None:
        with out_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def runtime_of(conversation: str) -> Any:
        with runtimes_lock:
            runtime = runtimes.get(conversation)
            if runtime is None:
                runtime = runtimes[conversation] = _runtime(args, store, conversation)
            return runtime

    def serve(conversation: str, step: int) -> None:
        started = time.time()
        begun_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        say({"conv": conversation, "step": step, "begin": started})
        granted.at = None
        try:
            result = runtime_of(conversation).execute(
                SkillExecutionRequest(
                    command=step_command(step, args.node, args.step_sleep), timeout_seconds=120
                )
            )
        except Exception as error:  # reported to the driver, which sends the step again
            say({"conv": conversation, "step": step, "error": f"{type(error).__name__}: {error}"})
            return
        answer, _, ran_at = result.stdout.strip().partition(" ")
        if result.exit_code != 0 or answer not in {"appended", "already"}:
            say(
                {
                    "conv": conversation,
                    "step": step,
                    "error": f"exit {result.exit_code}: {answer!r} {result.stderr.strip()!r}",
                    "anomaly": answer.startswith("bad:"),
                }
            )
            return
        say(
            {
                "conv": conversation,
                "step": step,
                "ack": answer,
                "ran_at": float(ran_at),
                "leased_at": granted.at,
                "begun_boot": begun_boot,
                "started": started,
                "ended": time.time(),
            }
        )

    pool = ThreadPoolExecutor(max_workers=args.workers)
    say({"ready": args.node})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("quit"):
            break
        pool.submit(serve, message["conv"], message["step"])
    pool.shutdown(wait=True)
    for runtime in runtimes.values():
        runtime.close()
    store.close()
    return 0


# ---------------------------------------------------------------- the driver


@dataclass
class Conversation:
    name: str
    next_step: int = 1
    outstanding: str | None = None
    """The node the outstanding step was sent to (``None`` when finished or waiting)."""
    sent_at: float = 0.0
    acked: list[int] = field(default_factory=list)
    takeover_from: float | None = None
    """Kill time when the outstanding step was moved off a killed node."""
    killed_boot: float = 0.0
    """The kill's time on the boot clock (``/proc/uptime``, which the containers share)."""
    held: bool = False
    """Whether the killed node had begun that step (its ``execute`` was running: waiting for
    or holding the lease), so the takeover waits for the lease's expiry."""
    begun: bool = False
    retry_at: float = 0.0


@dataclass
class Node:
    name: str
    process: subprocess.Popen[str]
    ready: bool = False
    alive: bool = True


@dataclass
class Outcome:
    takeovers: list[float]
    held_takeovers: list[float]
    held_starts: list[float]
    held_leased: list[float]
    held_waits: list[float]
    latencies: list[float]
    kills: int
    errors: list[str]
    anomalies: int
    lost_or_duplicated: int
    overlaps: int
    unfinished: int
    containers_before: int
    volumes_before: int
    held_leases: int
    containers_after: int
    volumes_after: int
    wall: float
    acked: int


class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.events: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        self.nodes: dict[str, Node] = {}
        self.generation = 0
        self.conversations = {
            f"chaos-{args.run_id}-{index:03d}": Conversation(f"chaos-{args.run_id}-{index:03d}")
            for index in range(args.conversations)
        }
        self.rng = random.Random(args.seed)
        self.takeovers: list[float] = []
        self.held_takeovers: list[float] = []
        self.held_starts: list[float] = []
        self.held_leased: list[float] = []
        self.held_waits: list[float] = []
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.anomalies = 0
        self.kills = 0

    # nodes

    def start_node(self, slot: int) -> None:
        self.generation += 1
        name = f"n{slot}g{self.generation}"
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--node",
            name,
            "--url",
            self.args.url,
            "--run-id",
            self.args.run_id,
            "--ttl",
            str(self.args.ttl),
            "--step-sleep",
            str(self.args.step_sleep),
            "--workers",
            str(self.args.workers),
            "--image",
            self.args.image,
        ]
        if self.args.docker_host:
            command += ["--docker-host", self.args.docker_host]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.nodes[name] = Node(name, process)
        threading.Thread(target=self._read, args=(name, process), daemon=True).start()

    def _read(self, name: str, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                self.events.put((name, json.loads(line)))
            except ValueError:
                continue

    def live(self) -> list[Node]:
        return [node for node in self.nodes.values() if node.alive and node.ready]

    def send(self, conversation: Conversation, *, avoid: str | None = None) -> bool:
        choices = [node for node in self.live() if node.name != avoid] or self.live()
        if not choices:
            return False
        node = self.rng.choice(choices)
        assert node.process.stdin is not None
        try:
            node.process.stdin.write(
                json.dumps({"conv": conversation.name, "step": conversation.next_step}) + "\n"
            )
            node.process.stdin.flush()
        except OSError:
            return False
        conversation.outstanding = node.name
        conversation.sent_at = time.monotonic()
        conversation.begun = False
        return True

    def kill(self) -> None:
        victims = [node for node in self.nodes.values() if node.alive]
        if not victims:
            return
        # A node in the middle of a command when there is one (always, with many conversations).
        busy = {c.outstanding for c in self.conversations.values() if c.begun}
        victims = [node for node in victims if node.name in busy] or victims
        victim = self.rng.choice(victims)
        killed_at = time.monotonic()
        killed_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.process.wait()
        victim.alive = False
        self.kills += 1
        slot = int(victim.name[1 : victim.name.index("g")])
        self.start_node(slot)
        for conversation in self.conversations.values():
            if conversation.outstanding == victim.name:
                conversation.outstanding = None
                conversation.takeover_from = killed_at
                conversation.killed_boot = killed_boot
                conversation.held = conversation.begun
                conversation.retry_at = 0.0

    # the run

    def handle(self, node_name: str, message: dict[str, Any]) -> None:
        if "ready" in message:
            self.nodes[node_name].ready = True
            return
        conversation = self.conversations[message["conv"]]
        step = message["step"]
        if step != conversation.next_step or node_name != conversation.outstanding:
            # A late answer to a step already acknowledged, or the answer of a node killed
            # since: the step was sent again to another node, which answers for it (``already``
            # when the dead node's command did run). Taking the dead node's answer would send
            # the next step while the step sent again may still run.
            return
        if "begin" in message:
            conversation.begun = True
            return
        if "ack" in message:
            conversation.acked.append(step)
            if conversation.takeover_from is not None:
                waited = time.monotonic() - conversation.takeover_from
                self.takeovers.append(waited)
                if conversation.held:
                    self.held_takeovers.append(waited)
                    self.held_starts.append(message["ran_at"] - conversation.killed_boot)
                    if message.get("leased_at") is not None:
                        self.held_leased.append(message["leased_at"] - conversation.killed_boot)
                        # the new node's own wait: from the kill, or from when one of its
                        # workers took the step up when that came later
                        since = max(conversation.killed_boot, message["begun_boot"])
                        self.held_waits.append(message["leased_at"] - since)
                conversation.takeover_from = None
            else:
                self.latencies.append(time.monotonic() - conversation.sent_at)
            conversation.next_step += 1
            conversation.outstanding = None
            return
        self.errors.append(f"{conversation.name} step {step} on {node_name}: {message['error']}")
        self.anomalies += bool(message.get("anomaly"))
        conversation.outstanding = None
        conversation.retry_at = time.monotonic() + 0.5

    def drive(self) -> float:
        for slot in range(self.args.nodes):
            self.start_node(slot)
        ready_by = time.monotonic() + 120
        while len(self.live()) < self.args.nodes and time.monotonic() < ready_by:
            try:
                self.handle(*self.events.get(timeout=0.5))
            except queue.Empty:
                continue
        started = time.monotonic()
        chaos_end = started + self.args.duration
        next_kill = started + self._kill_gap()
        kills_left = self.args.kills
        deadline = started + self.args.duration + self.args.timeout
        while True:
            now = time.monotonic()
            if now > deadline:
                self.errors.append("the run passed its deadline")
                break
            unfinished = [c for c in self.conversations.values() if c.next_step <= self.args.steps]
            if not unfinished:
                break
            if now >= next_kill and now < chaos_end and kills_left != 0 and self.live():
                self.kill()
                kills_left -= 1
                next_kill = now + self._kill_gap()
            for conversation in unfinished:
                if conversation.outstanding is None and now >= conversation.retry_at:
                    self.send(conversation)
            try:
                node_name, message = self.events.get(timeout=0.05)
            except queue.Empty:
                continue
            self.handle(node_name, message)
            while True:
                try:
                    node_name, message = self.events.get_nowait()
                except queue.Empty:
                    break
                self.handle(node_name, message)
        return time.monotonic() - started

    def _kill_gap(self) -> float:
        return self.args.kill_every * self.rng.uniform(0.5, 1.5)

    def stop_nodes(self) -> None:
        for node in self.nodes.values():
            if node.alive and node.process.stdin is not None:
                try:
                    node.process.stdin.write(json.dumps({"quit": True}) + "\n")
                    node.process.stdin.flush()
                except OSError:
                    pass
        for node in self.nodes.values():
            if node.alive:
                try:
                    node.process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()
                node.alive = False


def _labelled(client: Any, run_id: str) -> tuple[int, int]:
    label = f"{RUN_LABEL}={run_id}"
    containers = client.containers.list(all=True, filters={"label": label})
    volumes = client.volumes.list(filters={"label": label})
    return len(containers), len(volumes)


def chaos_run(args: argparse.Namespace) -> Outcome:
    """One run on the database ``args.url`` (its schema created here) and the engine."""
    import docker

    from skillruntime.core.conversations.sql import SqlConversationStore
    from skillruntime.docker import DockerSkillRuntime

    with SqlConversationStore(args.url, create_schema=True):
        pass
    driver = Driver(args)
    try:
        wall = driver.drive()
    finally:
        driver.stop_nodes()
    client = docker.DockerClient(base_url=args.docker_host or os.environ.get("DOCKER_HOST"))
    store = SqlConversationStore(args.url)
    lost_or_duplicated = overlaps = unfinished = held = 0
    try:
        containers_before, volumes_before = _labelled(client, args.run_id)
        after = None
        while True:
            records = store.list_records(after=after, limit=100)
            if not records:
                break
            for record in records:
                lease = store.get_lease(record.storage_key)
                if lease is not None and lease.owner is not None and not lease.expired():
                    held += 1
                    driver.errors.append(f"{record.conversation_id}: lease held by {lease.owner}")
            after = records[-1].storage_key
        expected = "".join(f"{step}\n" for step in range(1, args.steps + 1))
        for conversation in driver.conversations.values():
            if conversation.next_step <= args.steps:
                unfinished += 1
            if conversation.acked != sorted(set(conversation.acked)):
                lost_or_duplicated += 1
            runtime = DockerSkillRuntime(
                docker_host=args.docker_host,
                image=args.image,
                conversation_id=conversation.name,
                conversation_store=store,
                exclusive=True,
                lease_ttl_seconds=args.ttl,
                lease_wait_seconds=max(60.0, 6 * args.ttl),
                labels={RUN_LABEL: args.run_id},
            )
            with runtime:
                files = runtime.get_file_system()
                text = files.read_text("steps.txt") if files.exists("steps.txt") else ""
                lines = text.splitlines()
                acked = [str(step) for step in conversation.acked]
                if text != expected:
                    # lost or duplicated lines among the acknowledged ones
                    missing = sum(1 for step in acked if step not in lines)
                    duplicated = sum(lines.count(step) - 1 for step in set(lines) if step)
                    disorder = int(lines != sorted(lines, key=int))
                    lost_or_duplicated += max(1, missing + duplicated + disorder)
                    driver.errors.append(f"{conversation.name}: steps.txt {lines!r}")
                if files.exists("overlaps.log"):
                    count = len(files.read_text("overlaps.log").splitlines())
                    overlaps += count
                    driver.errors.append(f"{conversation.name}: {count} overlaps in overlaps.log")
                fenced = fence_overlaps(files.read_text("fence.log"))
                if fenced and not files.exists("overlaps.log"):
                    overlaps += fenced
        for conversation in driver.conversations.values():
            runtime = DockerSkillRuntime(
                docker_host=args.docker_host,
                image=args.image,
                conversation_id=conversation.name,
                conversation_store=store,
                exclusive=True,
                lease_ttl_seconds=args.ttl,
                labels={RUN_LABEL: args.run_id},
            )
            with runtime:
                try:
                    runtime.destroy_conversation()
                except Exception as error:
                    driver.errors.append(f"{conversation.name}: destroy failed: {error}")
        containers_after, volumes_after = _labelled(client, args.run_id)
    finally:
        store.close()
        client.close()
    return Outcome(
        takeovers=driver.takeovers,
        held_takeovers=driver.held_takeovers,
        held_starts=driver.held_starts,
        held_leased=driver.held_leased,
        held_waits=driver.held_waits,
        latencies=driver.latencies,
        kills=driver.kills,
        errors=driver.errors,
        anomalies=driver.anomalies,
        lost_or_duplicated=lost_or_duplicated,
        overlaps=overlaps,
        unfinished=unfinished,
        containers_before=containers_before,
        volumes_before=volumes_before,
        held_leases=held,
        containers_after=containers_after,
        volumes_after=volumes_after,
        wall=wall,
        acked=sum(len(c.acked) for c in driver.conversations.values()),
    )


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def rows_of(outcome: Outcome, args: argparse.Namespace) -> list[Row]:
    ttl = args.ttl
    leaked_containers = max(0, outcome.containers_before - args.conversations)
    leaked_volumes = max(0, outcome.volumes_before - args.conversations)
    left = outcome.containers_after + outcome.volumes_after
    zero = "count + 1 against 1 (target: 0)"
    held = outcome.held_takeovers
    rows = [
        Row(
            "step, sent to acknowledged, p50 (no kill)",
            _percentile(outcome.latencies, 0.5),
            ttl,
            note=f"lease TTL ({len(outcome.latencies)} steps)",
        ),
        Row(
            "step, sent to acknowledged, p99 (no kill)",
            _percentile(outcome.latencies, 0.99),
            ttl,
            note="lease TTL",
        ),
        Row(
            "takeover after a kill, every moved step, p50",
            _percentile(outcome.takeovers, 0.5),
            ttl,
            note=f"lease TTL ({len(outcome.takeovers)} moved steps, {outcome.kills} kills)",
        ),
        Row(
            "takeover after a kill, every moved step, p99",
            _percentile(outcome.takeovers, 0.99),
            ttl,
            note="lease TTL",
        ),
        Row(
            "lease wait of the taking node, p50",
            _percentile(outcome.held_waits, 0.5),
            ttl,
            note="lease TTL (from the kill, or from when a worker took the step up)",
        ),
        Row(
            "lease wait of the taking node, p99",
            _percentile(outcome.held_waits, 0.99),
            ttl,
            target=(ttl + 2) / ttl,
            note="lease TTL; target TTL + 2 s",
        ),
        Row(
            "kill to the lease granted to another node, p50",
            _percentile(outcome.held_leased, 0.5),
            ttl,
            note="lease TTL (leases the killed node held)",
        ),
        Row(
            "kill to the lease granted to another node, p99",
            _percentile(outcome.held_leased, 0.99),
            ttl,
            note="lease TTL",
        ),
        Row(
            "kill to the next command running, held lease, p50",
            _percentile(outcome.held_starts, 0.5),
            ttl,
            note="lease TTL (the command's start read in the container)",
        ),
        Row(
            "kill to the next command running, held lease, p99",
            _percentile(outcome.held_starts, 0.99),
            ttl,
            note="lease TTL",
        ),
        Row(
            "takeover of a lease the killed node held, p50",
            _percentile(held, 0.5),
            ttl,
            note=f"lease TTL ({len(held)} steps begun on the killed node)",
        ),
        Row(
            "takeover of a lease the killed node held, p99",
            _percentile(held, 0.99),
            ttl,
            note="lease TTL (kill to the step acknowledged by another node)",
        ),
    ]
    for name, count in [
        ("lost or duplicated acknowledged steps", outcome.lost_or_duplicated),
        ("overlapping commands of one conversation", outcome.overlaps),
        ("containers + volumes beyond one per conversation", leaked_containers + leaked_volumes),
        ("containers + volumes left after destroy", left),
        ("leases held at the end", outcome.held_leases),
        ("unfinished conversations", outcome.unfinished),
    ]:
        rows.append(Row(name, count + 1, 1, unit="count+1", target=1, note=zero))
    return rows


def _arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--node", help=argparse.SUPPRESS)
    parser.add_argument("--url", help="database URL (default: a fresh PostgreSQL database)")
    parser.add_argument("--run-id", default=uuid.uuid4().hex[:8])
    parser.add_argument("--docker-host", default=None)
    parser.add_argument("--image", default=os.environ.get("SKILLRUNTIME_DOCKER_TEST_IMAGE"))
    parser.add_argument("--conversations", type=int, default=60)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--workers", type=int, default=12, help="worker threads per node")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of kills")
    parser.add_argument("--kill-every", type=float, default=5.0)
    parser.add_argument("--kills", type=int, default=-1, help="at most this many (-1: no limit)")
    parser.add_argument("--ttl", type=float, default=5.0, help="lease TTL, seconds")
    parser.add_argument("--step-sleep", type=float, default=0.2)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds after the chaos")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", help="write the outcome here")
    return parser.parse_args(argv)


def _measure(args: argparse.Namespace) -> tuple[Outcome, list[Row]]:
    from sql_databases import temporary_database

    if args.image is None or (args.docker_host is None and not os.environ.get("DOCKER_HOST")):
        from docker_engine import ensure_engine

        engine = ensure_engine()
        args.image = args.image or engine.image
        args.docker_host = args.docker_host or engine.host
    args.docker_host = args.docker_host or os.environ["DOCKER_HOST"]
    if args.url:
        outcome = chaos_run(args)
    else:
        with temporary_database("postgresql") as url:
            args.url = url
            outcome = chaos_run(args)
    return outcome, rows_of(outcome, args)


def run(quick: bool) -> list[Row]:
    """The harness entry point (``run_benchmarks.py``)."""
    argv = []
    if quick:
        argv = ["--conversations", "6", "--steps", "6", "--duration", "30", "--kills", "1"]
        argv += ["--kill-every", "1.5", "--ttl", "2", "--workers", "4", "--timeout", "120"]
    return _measure(_arguments(argv))[1]


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.node:
        return node_main(args)
    outcome, rows = _measure(args)
    for row in rows:
        print(f"{row.name:52s} {row.value:9.3f} {row.unit:8s} ratio {row.ratio:6.3f} {row.note}")
    takeovers = sorted(outcome.held_takeovers)
    print(
        f"{outcome.kills} kills, {len(takeovers)} takeovers of held leases: "
        f"{[round(t, 2) for t in takeovers]}; {outcome.acked} acknowledged steps "
        f"in {outcome.wall:.1f} s; containers {outcome.containers_before}, volumes "
        f"{outcome.volumes_before} before destroy, {outcome.containers_after} + "
        f"{outcome.volumes_after} after; {len(outcome.errors)} errors"
    )
    for error in outcome.errors[:40]:
        print("  ", error)
    if args.json:
        Path(args.json).write_text(json.dumps(outcome.__dict__, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
