"""One download per file even when many threads and processes ask for the same revision."""

from __future__ import annotations

import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import preloaded_python
from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, SKILL_MD, demo_files, leftovers, tree
from doubles.viking.workers import lease_and_hash
from skillruntime.viking import VikingSkillStore


def _expected_downloads() -> dict[str, int]:
    return {f"{DEMO_ROOT}/{path}": 1 for path in demo_files()}


def test_sixteen_threads_download_each_file_once(
    viking: VikingDouble, make_store: Any, cache_dir: Path
) -> None:
    viking.faults.download_delay = 0.02
    shared = make_store()
    own = [make_store() for _ in range(8)]
    barrier = threading.Barrier(16)

    def worker(index: int) -> dict[str, bytes]:
        store = shared if index % 2 else own[index // 2]
        barrier.wait(timeout=30)
        with store.lease(DEMO_ROOT) as path:
            return tree(path)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(worker, range(16)))
    assert all(result == demo_files() for result in results)
    assert dict(viking.downloads) == _expected_downloads()
    assert leftovers(cache_dir) == []
    assert len(shared.cache_entries()) == 1


def test_four_processes_download_each_file_once(viking: VikingDouble, cache_dir: Path) -> None:
    viking.faults.download_delay = 0.05
    options = {"server_url": viking.url, "cache_dir": str(cache_dir)}
    context = preloaded_python.CONTEXT
    with context.Manager() as manager:
        barrier = manager.Barrier(4)
        with ProcessPoolExecutor(4, mp_context=context) as pool:
            futures = [pool.submit(lease_and_hash, options, DEMO_ROOT, barrier) for _ in range(4)]
            texts = [future.result(timeout=120) for future in futures]
    assert texts == [SKILL_MD.decode()] * 4
    assert dict(viking.downloads) == _expected_downloads()
    assert leftovers(cache_dir) == []


def test_threads_racing_with_pruning_always_get_whole_packages(
    viking: VikingDouble, make_store: Any
) -> None:
    store: VikingSkillStore = make_store(cache_max_entries=1)
    for index in range(3):
        viking.add_skill(f"viking://user/default/skills/s{index}", {"SKILL.md": SKILL_MD})
    uris = [DEMO_ROOT] + [f"viking://user/default/skills/s{index}" for index in range(3)]
    stop = threading.Event()

    def pruner() -> None:
        while not stop.is_set():
            store.prune(everything=True)

    def user(index: int) -> bool:
        uri = uris[index % len(uris)]
        with store.lease(uri) as path:
            assert (path / "SKILL.md").read_bytes() == SKILL_MD
            if uri == DEMO_ROOT:
                assert tree(path) == demo_files()
        return True

    thread = threading.Thread(target=pruner)
    thread.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(user, range(40)))
    finally:
        stop.set()
        thread.join(timeout=30)
