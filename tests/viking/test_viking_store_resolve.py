"""Resolving manifests: verification of what the server claims, and its refusals."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from typing import Any

import pytest
import requests

from doubles.viking import VikingDouble
from doubles.viking.samples import DEMO_ROOT, SKILL_MD
from skillruntime.viking import (
    SKILL_ACCESS_DENIED,
    SKILL_INTEGRITY_UNAVAILABLE,
    SKILL_INVALID,
    SKILL_NOT_FOUND,
    SKILL_PACKAGE_TOO_LARGE,
    SKILL_UNAVAILABLE,
    VikingSkillStore,
    VikingStoreError,
)
from skillruntime.viking.client import _envelope_error


def test_resolve_returns_verified_manifest_without_downloading(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    manifest = store.resolve(DEMO_ROOT)
    assert manifest.uri == DEMO_ROOT
    assert manifest.root_uri == DEMO_ROOT
    assert manifest.name == "demo"
    assert manifest.description == "A demo skill"
    assert manifest.revision == viking.revision(DEMO_ROOT)
    assert manifest.content_sha256 == hashlib.sha256(SKILL_MD).hexdigest()
    paths = [item.path for item in manifest.files]
    assert paths == ["SKILL.md", "assets/blob.bin", "references/guide.md", "scripts/run.sh"]
    assert len(manifest.signature) == 64
    assert sum(viking.downloads.values()) == 0


def test_resolve_accepts_skill_md_uri_and_sends_integrity_query(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    manifest = store.resolve(DEMO_ROOT + "/SKILL.md")
    assert manifest.root_uri == DEMO_ROOT


def test_server_summaries_are_not_part_of_the_package_but_of_the_signature(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    before = store.resolve(DEMO_ROOT)
    assert all(not item.path.startswith(".") for item in before.files)
    viking.set_file(DEMO_ROOT, ".overview.md", b"# rewritten by the semantic worker\n")
    after = store.resolve(DEMO_ROOT)
    assert after.files == before.files
    assert after.signature != before.signature
    assert after.revision != before.revision


def test_home_alias_resolves_to_the_callers_user_root(
    viking: VikingDouble, make_store: Any
) -> None:
    viking.add_skill("viking://user/alice/skills/demo", {"SKILL.md": SKILL_MD})
    store = make_store(user="alice")
    manifest = store.resolve("viking://~/skills/demo")
    assert manifest.root_uri == "viking://user/alice/skills/demo"
    assert manifest.uri == "viking://~/skills/demo"


def test_home_alias_refuses_a_fallback_to_agent_scope(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    viking.add_skill("viking://agent/skills/shared", {"SKILL.md": SKILL_MD})
    with pytest.raises(VikingStoreError) as caught:
        store.resolve("viking://~/skills/shared")
    assert caught.value.code == SKILL_INVALID


def test_agent_scope_resolves(viking: VikingDouble, store: VikingSkillStore) -> None:
    viking.add_skill("viking://agent/skills/shared", {"SKILL.md": SKILL_MD})
    assert store.resolve("viking://agent/skills/shared").root_uri == "viking://agent/skills/shared"


def test_scope_fallback_to_another_root_is_refused(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    # Only the user has "demo"; asking the agent scope makes the server fall back to the user.
    with pytest.raises(VikingStoreError) as caught:
        store.resolve("viking://agent/skills/demo")
    assert caught.value.code == SKILL_INVALID
    assert "scope fallback" in str(caught.value)


def test_forced_fallback_between_users_is_refused(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    viking.add_skill("viking://agent/skills/other", {"SKILL.md": SKILL_MD})
    viking.faults.serve_root["viking://user/default/skills/other"] = "viking://agent/skills/other"
    with pytest.raises(VikingStoreError) as caught:
        store.resolve("viking://user/default/skills/other")
    assert caught.value.code == SKILL_INVALID


@pytest.mark.parametrize(
    "uri",
    [
        "https://example.com/skills/x",
        "viking://user/skills/demo",
        "viking://user/default/skills/../x",
        "viking://user/default/skills/bad name",
        "viking://user/default/resources/demo",
        "viking://agent/skills/" + "x" * 65,
    ],
)
def test_bad_uris_are_refused_before_any_request(
    viking: VikingDouble, store: VikingSkillStore, uri: str
) -> None:
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(uri)
    assert caught.value.code == SKILL_INVALID
    assert viking.requests == []


def test_missing_skill_is_not_found(store: VikingSkillStore) -> None:
    with pytest.raises(VikingStoreError) as caught:
        store.resolve("viking://user/default/skills/nope")
    assert caught.value.code == SKILL_NOT_FOUND


def _patched(viking: VikingDouble, patch: Any) -> None:
    viking.faults.manifest_hook = patch


def _entry(result: dict[str, Any], path: str) -> dict[str, Any]:
    return next(entry for entry in result["files"] if entry["path"] == path)


def _rehash(result: dict[str, Any]) -> None:
    from doubles.viking.server import server_revision

    result["revision"] = server_revision(result["files"])


def _drop_skill_md(result: dict[str, Any]) -> None:
    result["files"].remove(_entry(result, "SKILL.md"))
    _rehash(result)


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        (lambda r: r.pop("revision"), SKILL_INTEGRITY_UNAVAILABLE),
        (lambda r: r.pop("content_sha256"), SKILL_INTEGRITY_UNAVAILABLE),
        (lambda r: r.update(content=""), SKILL_INTEGRITY_UNAVAILABLE),
        (lambda r: r.pop("files"), SKILL_INTEGRITY_UNAVAILABLE),
        (lambda r: _entry(r, "scripts/run.sh").pop("sha256"), SKILL_INTEGRITY_UNAVAILABLE),
        (lambda r: _entry(r, "scripts/run.sh").pop("size"), SKILL_INTEGRITY_UNAVAILABLE),
        (lambda r: r.update(content=r["content"] + "x"), SKILL_INVALID),
        (lambda r: r.update(revision="0" * 64), SKILL_INVALID),
        (lambda r: _entry(r, "scripts/run.sh").update(sha256="ABC"), SKILL_INVALID),
        (lambda r: _entry(r, "scripts/run.sh").update(size=-1), SKILL_INVALID),
        (lambda r: _entry(r, "scripts/run.sh").update(size=True), SKILL_INVALID),
        (lambda r: _entry(r, "SKILL.md").update(sha256="0" * 64), SKILL_INVALID),
        (lambda r: r.update(root_uri="viking://user/default/skills/other"), SKILL_INVALID),
        (lambda r: _entry(r, "scripts/run.sh").update(uri="viking://agent/x"), SKILL_INVALID),
        (_drop_skill_md, SKILL_INVALID),
        (lambda r: r["files"].append(dict(_entry(r, "scripts/run.sh"))), SKILL_INVALID),
    ],
)
def test_inconsistent_manifests_are_refused_with_their_code(
    viking: VikingDouble, store: VikingSkillStore, patch: Any, code: str
) -> None:
    _patched(viking, patch)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == code


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "../escape.sh",
        "scripts/../../escape.sh",
        "C:/windows/x",
        "scripts\\run.sh",
        "%2e%2e/escape.sh",
        "%252e%252e%252fescape.sh",
        "a//b",
        "./x",
        "x\x00y",
    ],
)
def test_unsafe_paths_are_refused(viking: VikingDouble, store: VikingSkillStore, path: str) -> None:
    def patch(result: dict[str, Any]) -> None:
        data = b"evil"
        result["files"].append(
            {
                "name": "x",
                "uri": f"{result['root_uri']}/{path}",
                "path": path,
                "is_dir": False,
                "kind": "auxiliary",
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        _rehash(result)

    _patched(viking, patch)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_INVALID
    assert sum(viking.downloads.values()) == 0


def test_file_under_a_file_is_refused(viking: VikingDouble, store: VikingSkillStore) -> None:
    def patch(result: dict[str, Any]) -> None:
        entry = dict(_entry(result, "scripts/run.sh"))
        entry.update(path="scripts/run.sh/inner", uri=f"{result['root_uri']}/scripts/run.sh/inner")
        result["files"].append(entry)
        _rehash(result)

    _patched(viking, patch)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_INVALID


def test_revision_check_can_be_disabled(viking: VikingDouble, make_store: Any) -> None:
    viking.faults.manifest_hook = lambda r: r.update(revision="server-specific-revision")
    store = make_store(verify_revision=False)
    assert store.resolve(DEMO_ROOT).revision == "server-specific-revision"


def test_busy_integrity_reads_are_retried(viking: VikingDouble, store: VikingSkillStore) -> None:
    viking.faults.busy_reads = 3
    viking.faults.unavailable_reads = 1
    assert store.resolve(DEMO_ROOT).root_uri == DEMO_ROOT
    assert viking.skill_reads == 5


def test_retries_are_bounded(viking: VikingDouble, make_store: Any) -> None:
    viking.faults.busy_reads = 100
    store = make_store(busy_retries=2)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE
    assert viking.skill_reads == 3


def _error_response(message: str) -> tuple[requests.Response, io.BytesIO]:
    body = {
        "status": "error",
        "error": {"code": "CONFLICT", "message": message, "details": {"retryable": True}},
    }
    raw = io.BytesIO(json.dumps(body).encode())
    response = requests.Response()
    response.status_code = 409
    response.raw = raw
    return response, raw


def test_error_envelopes_are_read_within_a_bound() -> None:
    small, _ = _error_response("busy")
    assert _envelope_error(small) == ("CONFLICT", "busy", {"retryable": True})
    huge, raw = _error_response("x" * (1024 * 1024))
    assert _envelope_error(huge) == ("", "", {})
    assert raw.tell() < 256 * 1024  # the rest of the body was never read


def test_server_integrity_limit_is_package_too_large(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    viking.faults.exhausted.add(DEMO_ROOT)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_PACKAGE_TOO_LARGE


def test_declared_limits_are_checked_before_downloading(
    viking: VikingDouble, make_store: Any
) -> None:
    files = {"SKILL.md": SKILL_MD} | {f"f{i}.txt": b"x" for i in range(4)}
    viking.add_skill("viking://user/default/skills/many", files)
    viking.add_skill("viking://user/default/skills/big", {"SKILL.md": SKILL_MD, "a": b"y" * 2000})
    cases = [
        ("many", {"max_files": 4}),
        ("big", {"max_file_bytes": 1999}),
        ("big", {"max_total_bytes": 2000}),
    ]
    for name, limits in cases:
        store = make_store(**limits)
        with pytest.raises(VikingStoreError) as caught:
            store.resolve(f"viking://user/default/skills/{name}")
        assert caught.value.code == SKILL_PACKAGE_TOO_LARGE, limits
    assert make_store(max_files=5).resolve("viking://user/default/skills/many")
    assert sum(viking.downloads.values()) == 0


def test_options_given_twice_are_merged_and_validated(make_store: Any) -> None:
    base = make_store().options
    store = VikingSkillStore(base, max_files=7)
    assert store.options.max_files == 7
    assert store.options.server_url == base.server_url
    store.close()
    with pytest.raises(ValueError, match="server_url"):
        VikingSkillStore(base, server_url="ftp://example.com")


def test_effective_limits_are_the_stricter_of_server_and_client(make_store: Any) -> None:
    options = make_store(max_files=10_000, max_file_bytes=1 << 40, max_total_bytes=1 << 40).options
    assert options.effective_max_files == 512
    assert options.effective_max_file_bytes == 16 * 1024 * 1024
    assert options.effective_max_total_bytes == 64 * 1024 * 1024


def test_api_key_auth_header_and_no_key_in_errors(
    make_store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with VikingDouble(api_keys={"k-123-secret": ("acme", "bob")}) as double:
        double.add_skill("viking://user/bob/skills/demo", {"SKILL.md": SKILL_MD}, account="acme")
        good = make_store(server_url=double.url, api_key="k-123-secret")
        assert good.resolve("viking://~/skills/demo").root_uri == "viking://user/bob/skills/demo"
        assert double.requests[-1][1].get("X-API-Key") == "k-123-secret"
        bad = make_store(server_url=double.url, api_key="wrong-secret-value")
        with pytest.raises(VikingStoreError) as caught:
            bad.resolve("viking://~/skills/demo")
        assert caught.value.code == SKILL_ACCESS_DENIED
        assert "wrong-secret-value" not in str(caught.value)
        assert "wrong-secret-value" not in repr(bad.options)
        good.materialize("viking://~/skills/demo")
    assert "secret" not in caplog.text


def test_dev_identity_headers(viking: VikingDouble, make_store: Any) -> None:
    viking.add_skill("viking://user/alice/skills/demo", {"SKILL.md": SKILL_MD}, account="acme")
    store = make_store(account="acme", user="alice", agent="bot-1")
    store.resolve("viking://user/alice/skills/demo")
    headers = viking.requests[-1][1]
    assert headers["X-OpenViking-Account"] == "acme"
    assert headers["X-OpenViking-User"] == "alice"
    assert headers["X-OpenViking-Actor-Peer"] == "bot-1"


def test_unreachable_server_is_unavailable(make_store: Any) -> None:
    store = make_store(server_url="http://127.0.0.1:9", busy_retries=1, connect_timeout=1)
    with pytest.raises(VikingStoreError) as caught:
        store.resolve(DEMO_ROOT)
    assert caught.value.code == SKILL_UNAVAILABLE


def test_list_skills_defaults_to_user_and_agent_scopes(
    viking: VikingDouble, store: VikingSkillStore
) -> None:
    viking.add_skill("viking://agent/skills/shared", {"SKILL.md": SKILL_MD}, description="S")
    viking.add_skill("viking://user/alice/skills/hidden", {"SKILL.md": SKILL_MD})
    found = store.list_skills()
    assert [s.uri for s in found] == ["viking://agent/skills/shared", DEMO_ROOT]
    assert [s.name for s in found] == ["shared", "demo"]
    assert found[0].description == "S"
    assert [s.uri for s in store.list_skills("viking://agent/skills")] == [
        "viking://agent/skills/shared"
    ]
    assert [s.uri for s in store.list_skills("viking://~/skills")] == [DEMO_ROOT]
    assert [s.uri for s in store.list_skills("viking://user/default/skills/")] == [DEMO_ROOT]
