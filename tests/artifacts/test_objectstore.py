"""Object-store specifics: integrity on download, one download per digest, cache hits are free."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest
from artifact_helpers import (
    CallCounter,
    CountingFileSystem,
    good_zip,
    leftovers,
    read_log,
)

import preloaded_python
from moto_s3 import s3_options
from skillruntime.core.artifacts import (
    ArtifactIntegrityError,
    ArtifactStoreError,
    ObjectSkillArtifactStore,
    SkillArtifact,
    SkillPackage,
)

HERE = Path(__file__).resolve().parent
BACKENDS = ["memory", "file", "s3"]
Backend = tuple[Any, str, dict[str, Any], str]


def _filesystem(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Any, str, dict[str, Any]]:
    """(fsspec file system, base path, options to rebuild it) for a backend."""
    if kind == "memory":
        return fsspec.filesystem("memory"), f"/skills-{uuid.uuid4().hex}/prefix", {}
    if kind == "file":
        return fsspec.filesystem("file"), str(tmp_path / "objects" / "prefix"), {}
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    options = s3_options(endpoint)
    return fsspec.filesystem("s3", **options), f"{bucket}/prefix", options


def _installed(inner: Any, base: str, tmp_path: Path) -> SkillArtifact:
    installer = ObjectSkillArtifactStore(base, filesystem=inner, cache_dir=tmp_path / "installer")
    return installer.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, str, dict[str, Any], str]:
    inner, base, options = _filesystem(request.param, tmp_path, request)
    return inner, base, options, request.param


def test_packages_are_stored_under_name_version_digest(backend: Backend, tmp_path: Path) -> None:
    inner, base, _, _ = backend
    installed = _installed(inner, base, tmp_path)
    assert installed.storage_key == f"pdf/1/{installed.digest_hex}.zip"
    inner.invalidate_cache()
    assert inner.cat_file(f"{base}/{installed.storage_key}") == good_zip()


def test_tampered_object_is_refused_on_download(backend: Backend, tmp_path: Path) -> None:
    inner, base, _, _ = backend
    installed = _installed(inner, base, tmp_path)
    inner.pipe_file(
        f"{base}/{installed.storage_key}", good_zip(extra=b"import os; os.system('x')\n")
    )
    reader = ObjectSkillArtifactStore(base, filesystem=inner, cache_dir=tmp_path / "reader")
    with pytest.raises(ArtifactIntegrityError) as caught:
        reader.materialize(installed)
    assert caught.value.code == "DIGEST_MISMATCH"
    assert [p for p in leftovers(reader) if p.startswith("cache:")] == []


def test_truncated_object_is_refused_on_download(backend: Backend, tmp_path: Path) -> None:
    inner, base, _, _ = backend
    installed = _installed(inner, base, tmp_path)
    inner.pipe_file(f"{base}/{installed.storage_key}", good_zip()[:-10])
    reader = ObjectSkillArtifactStore(base, filesystem=inner, cache_dir=tmp_path / "reader")
    with pytest.raises(ArtifactIntegrityError):
        reader.materialize(installed)


def test_download_once_then_cache_hits_make_no_request(backend: Backend, tmp_path: Path) -> None:
    inner, base, _, _ = backend
    installed = _installed(inner, base, tmp_path)
    counter = CallCounter()
    reader = ObjectSkillArtifactStore(
        base, filesystem=CountingFileSystem(inner, counter), cache_dir=tmp_path / "reader"
    )
    first = reader.materialize(installed)
    assert counter.counts == {"open": 1}
    before = counter.total
    with reader.lease(installed) as again:
        assert again == first
    assert reader.materialize(installed) == first
    assert counter.total == before


def test_install_warms_the_local_cache(tmp_path: Path) -> None:
    counter = CallCounter()
    inner = fsspec.filesystem("memory")
    store = ObjectSkillArtifactStore(
        f"/warm-{uuid.uuid4().hex}",
        filesystem=CountingFileSystem(inner, counter),
        cache_dir=tmp_path,
    )
    installed = store.install(
        SkillArtifact(name="pdf", version="1"), SkillPackage.from_bytes(good_zip())
    )
    before = counter.total
    store.materialize(installed)
    assert counter.total == before


def test_threads_materializing_one_digest_download_it_once(
    backend: Backend, tmp_path: Path
) -> None:
    inner, base, _, _ = backend
    installed = _installed(inner, base, tmp_path)
    counter = CallCounter()
    reader = ObjectSkillArtifactStore(
        base, filesystem=CountingFileSystem(inner, counter), cache_dir=tmp_path / "reader"
    )
    barrier = threading.Barrier(8)
    results: list[Path] = []

    def work() -> None:
        barrier.wait()
        results.append(reader.materialize(installed))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1
    assert len(results) == 8
    assert counter.counts == {"open": 1}


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_two_processes_materializing_one_digest_download_it_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    inner, base, options = _filesystem(kind, tmp_path, request)
    installed = _installed(inner, base, tmp_path)
    log = tmp_path / "calls.log"
    workers = []
    for index in range(2):
        config = {
            "protocol": "file" if kind == "file" else "s3",
            "options": options,
            "base": base,
            "cache": str(tmp_path / "shared-cache"),
            "artifact": installed.model_dump(),
            "log": str(log),
            "ready": str(tmp_path / f"ready-{index}"),
            "go": str(tmp_path / "go"),
        }
        workers.append(
            preloaded_python.Popen(
                [sys.executable, str(HERE / "materialize_worker.py"), json.dumps(config)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.monotonic() + 60
    for index in range(2):
        ready = tmp_path / f"ready-{index}"
        while not ready.exists():
            assert workers[index].poll() is None, workers[index].communicate()
            assert time.monotonic() < deadline, f"worker {index} never got ready"
            time.sleep(0.01)
    (tmp_path / "go").touch()
    outputs = [worker.communicate(timeout=120) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]
    calls = read_log(log)
    assert [c["call"] for c in calls] == ["open"]


def test_missing_fsspec_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(ArtifactStoreError, match=r"skillruntime-core\[objectstore\]"):
        ObjectSkillArtifactStore("memory://x", cache_dir=tmp_path)


def test_default_cache_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from skillruntime.core.artifacts import default_cache_dir

    monkeypatch.setenv("SKILLRUNTIME_ARTIFACT_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SKILLRUNTIME_ARTIFACT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "skillruntime" / "artifacts"


def test_materialize_needs_a_digest(tmp_path: Path) -> None:
    store = ObjectSkillArtifactStore(f"memory://d-{uuid.uuid4().hex}", cache_dir=tmp_path)
    with pytest.raises(ArtifactStoreError, match="no digest"):
        store.materialize(SkillArtifact(name="pdf", version="1"))
