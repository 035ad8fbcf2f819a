"""Lifecycle API routes of the double (``/v1/sandboxes...``), after opensandbox-server 1.1.1.

Request and response keys are camelCase; errors are flat ``{code, message}`` except request
validation failures, which keep FastAPI's 422 ``{"detail": [...]}`` shape.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any
from urllib.parse import parse_qsl, unquote

from doubles.opensandbox.exchange import Exchange
from doubles.opensandbox.registry import STATE_PAUSED, STATE_RUNNING, Registry, Sandbox, iso
from doubles.opensandbox.sandboxfs import ApiError

EXECD_PORT = 44772
EGRESS_PORT = 18080
MIN_TIMEOUT = 60
RESERVED_PREFIX = "opensandbox.io/"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^(?:{_DNS_LABEL}\.)*{_DNS_LABEL}$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def not_found(sandbox_id: str) -> ApiError:
    """The Docker runtime's 404 for an unknown, deleted or expired sandbox."""
    return ApiError(404, "DOCKER::SANDBOX_NOT_FOUND", f"Sandbox {sandbox_id} not found.")


class ValidationError(ApiError):
    """A FastAPI request validation failure: 422 with a ``detail`` list, not ``{code, message}``."""

    def __init__(self, loc: list[str | int], msg: str) -> None:
        super().__init__(422, "VALIDATION_ERROR", msg)
        self.loc = loc

    def body(self) -> dict[str, Any]:
        """FastAPI's ``{"detail": [{"type", "loc", "msg"}]}``."""
        return {"detail": [{"type": "value_error", "loc": self.loc, "msg": self.message}]}


def validation_error(loc: list[str | int], msg: str) -> ApiError:
    """A FastAPI-style request validation failure."""
    return ValidationError(loc, msg)


def _label_key_ok(key: str) -> bool:
    name = key
    if "/" in key:
        prefix, name = key.split("/", 1)
        if not prefix or not name or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix):
            return False
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def check_metadata(metadata: dict[str, Any]) -> None:
    """Kubernetes label rules, as the server's ``ensure_metadata_labels``."""
    for key, value in metadata.items():
        if key.startswith(RESERVED_PREFIX):
            raise ApiError(
                400,
                "SANDBOX::INVALID_METADATA_LABEL",
                f"Metadata key '{key}' uses the reserved prefix '{RESERVED_PREFIX}'. Keys under "
                "this prefix are managed by the system and cannot be set via metadata.",
            )
        if not _label_key_ok(key):
            raise ApiError(
                400,
                "SANDBOX::INVALID_METADATA_LABEL",
                f"Metadata key '{key}' is invalid: must be either a name or a DNS-subdomain "
                "prefix and name separated by /, where the name is up to 63 characters.",
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            raise ApiError(
                400,
                "SANDBOX::INVALID_METADATA_LABEL",
                f"Metadata value '{value}' is invalid: must be 63 characters or less, "
                "start/end with an alphanumeric character, and contain only alphanumeric, "
                "'-', '_', or '.' characters.",
            )


def _str_map(value: Any, loc: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise validation_error(["body", loc], "Input should be a valid dictionary of strings")
    return dict(value)


def create(ex: Exchange, registry: Registry) -> None:
    """``POST /sandboxes`` → 202 ``CreateSandboxResponse``."""
    try:
        body = ex.body.json()
    except ValueError as exc:
        raise validation_error(["body"], f"JSON decode error: {exc}") from exc
    if not isinstance(body, dict):
        raise validation_error(["body"], "Input should be a valid dictionary")
    image = body.get("image")
    snapshot_id = body.get("snapshotId")
    if body.get("templateId") is not None:
        raise ApiError(
            400,
            "SANDBOX::INVALID_REQUEST",
            "templateId is only supported by the fast-sandbox runtime.",
        )
    if (image is None) == (snapshot_id is None):
        raise validation_error(["body"], "Exactly one of image or snapshotId must be provided.")
    if snapshot_id is not None:
        # The double keeps no snapshots, so every snapshot id is unknown.
        raise ApiError(404, "SNAPSHOT::NOT_FOUND", f"Snapshot {snapshot_id} not found.")
    if image is not None:
        if not isinstance(image, dict) or not isinstance(image.get("uri"), str) or not image["uri"]:
            raise validation_error(["body", "image", "uri"], "Field required")
        image = {"uri": image["uri"]}  # credentials are never echoed back
    entrypoint = body.get("entrypoint")
    if image is not None and (
        not isinstance(entrypoint, list)
        or not entrypoint
        or not all(isinstance(a, str) for a in entrypoint)
    ):
        raise validation_error(["body", "entrypoint"], "Field required")
    resource_limits = body.get("resourceLimits")
    if not isinstance(resource_limits, dict):
        raise validation_error(["body", "resourceLimits"], "Field required")
    timeout = body.get("timeout")
    if timeout is not None:
        if not isinstance(timeout, int) or isinstance(timeout, bool):
            raise validation_error(["body", "timeout"], "Input should be a valid integer")
        if timeout < MIN_TIMEOUT:
            raise validation_error(
                ["body", "timeout"], f"Input should be greater than or equal to {MIN_TIMEOUT}"
            )
    env = _str_map(body.get("env"), "env")
    metadata = _str_map(body.get("metadata"), "metadata")
    check_metadata(metadata)
    extensions = body.get("extensions")
    platform = body.get("platform")
    sandbox = registry.create(
        image=image,
        snapshot_id=snapshot_id if isinstance(snapshot_id, str) else None,
        entrypoint=list(entrypoint or []),
        env=env,
        metadata=metadata,
        resource_limits=resource_limits,
        extensions=extensions if isinstance(extensions, dict) else None,
        platform=platform if isinstance(platform, dict) else None,
        timeout_seconds=timeout,
    )
    payload = sandbox.to_json()
    payload.pop("image", None)
    payload.pop("snapshotId", None)
    ex.send_json(202, payload)


def require(registry: Registry, sandbox_id: str) -> Sandbox:
    """The live sandbox or a 404."""
    sandbox = registry.get(sandbox_id)
    if sandbox is None:
        raise not_found(sandbox_id)
    return sandbox


def get(ex: Exchange, registry: Registry, sandbox_id: str) -> None:
    """``GET /sandboxes/{id}``."""
    ex.send_json(200, require(registry, sandbox_id).to_json())


def delete(ex: Exchange, registry: Registry, sandbox_id: str) -> None:
    """``DELETE /sandboxes/{id}`` → 204; the sandbox's processes die and its files vanish."""
    require(registry, sandbox_id)
    if not registry.remove(sandbox_id, reason="deletes"):
        raise not_found(sandbox_id)
    ex.send_empty(204)


def list_sandboxes(ex: Exchange, registry: Registry) -> None:
    """``GET /sandboxes?state=&metadata=k%3Dv%26k2%3Dv2&page=&pageSize=``."""

    def int_param(name: str, default: int, high: int | None) -> int:
        raw = ex.param(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError as exc:
            raise validation_error(["query", name], "Input should be a valid integer") from exc
        if value < 1 or (high is not None and value > high):
            raise validation_error(["query", name], "Input out of range")
        return value

    page = int_param("page", 1, None)
    page_size = int_param("pageSize", 20, 200)
    states = {s.lower() for s in ex.params("state")}
    wanted: dict[str, str] = {}
    raw_meta = ex.param("metadata")
    if raw_meta and not registry.ignore_metadata_filter:
        for key, value in parse_qsl(raw_meta, keep_blank_values=True):
            wanted[unquote(key)] = unquote(value)
    items = [
        s
        for s in registry.all()
        if (not states or s.state.lower() in states)
        and all(s.metadata.get(k) == v for k, v in wanted.items())
    ]
    total = len(items)
    total_pages = math.ceil(total / page_size) if total else 0
    start = (page - 1) * page_size
    ex.send_json(
        200,
        {
            "items": [s.to_json() for s in items[start : start + page_size]],
            "pagination": {
                "page": page,
                "pageSize": page_size,
                "totalItems": total,
                "totalPages": total_pages,
                "hasNextPage": page < total_pages,
            },
        },
    )


def endpoint(ex: Exchange, registry: Registry, sandbox_id: str, port_raw: str, mount: str) -> None:
    """``GET /sandboxes/{id}/endpoints/{port}?use_server_proxy=``.

    Direct mode mirrors the Docker bridge layout, ``host:execdPort/proxy/{port}``, here
    ``127.0.0.1:PORT/sandbox/{id}/proxy/{port}``; server-proxy mode answers
    ``127.0.0.1:PORT{mount}/sandboxes/{id}/proxy/{port}``, which requires the API key.
    """
    try:
        port = int(port_raw)
    except ValueError as exc:
        raise validation_error(["path", "port"], "Input should be a valid integer") from exc
    if not 1 <= port <= 65535:
        raise ApiError(400, "DOCKER::INVALID_PORT", f"Invalid port {port}.")
    require(registry, sandbox_id)
    proxy = (ex.param("use_server_proxy") or "false").lower() == "true"
    host = ex.base_url.split("://", 1)[-1]
    if proxy:
        value = f"{host}{mount}/sandboxes/{sandbox_id}/proxy/{port}"
    else:
        value = f"{host}/sandbox/{sandbox_id}/proxy/{port}"
    ex.send_json(200, {"endpoint": value})


def renew(ex: Exchange, registry: Registry, sandbox_id: str) -> None:
    """``POST /sandboxes/{id}/renew-expiration`` ``{expiresAt}``: expiry becomes exactly that."""
    sandbox = require(registry, sandbox_id)
    try:
        body = ex.body.json()
    except ValueError as exc:
        raise validation_error(["body"], f"JSON decode error: {exc}") from exc
    raw = body.get("expiresAt") if isinstance(body, dict) else None
    if not isinstance(raw, str):
        raise validation_error(["body", "expiresAt"], "Field required")
    try:
        when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise validation_error(["body", "expiresAt"], "Input should be a valid datetime") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    if when <= registry.now():
        raise ApiError(
            400, "DOCKER::INVALID_EXPIRATION", "New expiration time must be in the future."
        )
    if sandbox.expires_at is None:
        raise ApiError(
            409,
            "DOCKER::INVALID_EXPIRATION",
            f"Sandbox {sandbox_id} does not have automatic expiration enabled.",
        )
    sandbox.expires_at = when
    ex.send_json(200, {"expiresAt": iso(when)})


def pause(ex: Exchange, registry: Registry, sandbox_id: str) -> None:
    """``POST /sandboxes/{id}/pause`` → 202; 409 unless running."""
    sandbox = require(registry, sandbox_id)
    if sandbox.state != STATE_RUNNING:
        raise ApiError(
            409,
            "DOCKER::SANDBOX_NOT_RUNNING",
            f"Sandbox {sandbox_id} is not running (state {sandbox.state}).",
        )
    if sandbox.commands is not None:
        sandbox.commands.pause()
    registry.set_state(sandbox, STATE_PAUSED, "CONTAINER_PAUSED", "Sandbox container is paused.")
    ex.send_empty(202)


def resume(ex: Exchange, registry: Registry, sandbox_id: str) -> None:
    """``POST /sandboxes/{id}/resume`` → 202; 409 unless paused."""
    sandbox = require(registry, sandbox_id)
    if sandbox.state != STATE_PAUSED:
        raise ApiError(
            409,
            "DOCKER::SANDBOX_NOT_PAUSED",
            f"Sandbox {sandbox_id} is not paused (state {sandbox.state}).",
        )
    if sandbox.commands is not None:
        sandbox.commands.resume()
    registry.set_state(
        sandbox, STATE_RUNNING, "CONTAINER_RUNNING", "Sandbox container started successfully."
    )
    ex.send_empty(202)


def patch_metadata(ex: Exchange, registry: Registry, sandbox_id: str) -> None:
    """``PATCH /sandboxes/{id}/metadata``: JSON merge patch, ``null`` deletes a key."""
    sandbox = require(registry, sandbox_id)
    try:
        body = ex.body.json()
    except ValueError as exc:
        raise validation_error(["body"], f"JSON decode error: {exc}") from exc
    if not isinstance(body, dict):
        raise validation_error(["body"], "Input should be a valid dictionary")
    additions = {k: v for k, v in body.items() if v is not None}
    check_metadata(additions)
    merged = {**sandbox.metadata, **{k: str(v) for k, v in additions.items()}}
    for key, value in body.items():
        if value is None:
            merged.pop(key, None)
    sandbox.metadata = merged
    ex.send_json(200, sandbox.to_json())
