"""Subprocess worker: materialize one artifact through a counting file system.

Usage: python materialize_worker.py CONFIG_JSON. The config names the fsspec protocol and its
options, the store base path, the cache directory, the artifact, a call log and a ready/go pair of
files so that several workers start materializing at the same moment.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fsspec
from artifact_helpers import CallCounter, CountingFileSystem

from skillruntime.core.artifacts import ObjectSkillArtifactStore, SkillArtifact


def main() -> None:
    config = json.loads(sys.argv[1])
    inner = fsspec.filesystem(config["protocol"], **config["options"])
    counter = CallCounter(Path(config["log"]))
    store = ObjectSkillArtifactStore(
        config["base"], filesystem=CountingFileSystem(inner, counter), cache_dir=config["cache"]
    )
    artifact = SkillArtifact.model_validate(config["artifact"])
    Path(config["ready"]).touch()
    go = Path(config["go"])
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("never told to go")
        time.sleep(0.005)
    with store.lease(artifact) as directory:
        print(directory)


if __name__ == "__main__":
    main()
