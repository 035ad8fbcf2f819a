"""Wire-level building blocks of the AIO Sandbox double: envelope, validation errors, file errors.

The shapes follow the FastAPI/pydantic-v2 server described in ``aio-openapi-v1.9.4.json``:

* every ``/v1`` JSON answer is the envelope ``{success, message, data, hint}`` with ``message``
  defaulting to ``"Operation successful"``;
* request validation failures are HTTP 422 ``{"detail": [{type, loc, msg, input}]}``;
* file failures are HTTP 200 with ``success: false`` and a ``FileOperationError`` in ``data``.
"""

from __future__ import annotations

import errno as errno_mod
import json
import math
from dataclasses import dataclass
from typing import Any

DEFAULT_MESSAGE = "Operation successful"


class HttpError(Exception):
    """Raised by route handlers to answer with a given status and JSON body."""

    def __init__(self, status: int, body: Any, *, close: bool = False) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body
        self.close = close  # the request body was left half-read: drop the connection


def envelope(
    data: Any = None, *, success: bool = True, message: str | None = None, hint: str | None = None
) -> dict[str, Any]:
    """Return the standard response envelope."""
    return {
        "success": success,
        "message": DEFAULT_MESSAGE if message is None and success else message,
        "data": data,
        "hint": hint,
    }


def not_found(message: str) -> HttpError:
    """A 404 carrying the envelope with ``success: false`` (e.g. ``Session not found: <id>``)."""
    return HttpError(404, {"success": False, "message": message, "data": None, "hint": None})


def validation_error(items: list[dict[str, Any]]) -> HttpError:
    """A FastAPI-style 422."""
    return HttpError(422, {"detail": items})


@dataclass(frozen=True)
class Field:
    """One request-body field: JSON kind, whether it is required, nullability and default."""

    kind: str  # "str", "int", "number", "bool", "str_map", "str_list", "int_list", "any"
    required: bool = False
    nullable: bool = True
    default: Any = None
    choices: tuple[str, ...] | None = None


_MESSAGES = {
    "str": ("string_type", "Input should be a valid string"),
    "int": ("int_type", "Input should be a valid integer"),
    "number": ("float_type", "Input should be a valid number"),
    "bool": ("bool_type", "Input should be a valid boolean"),
    "str_map": ("dict_type", "Input should be a valid dictionary"),
    "str_list": ("list_type", "Input should be a valid list"),
    "int_list": ("list_type", "Input should be a valid list"),
}


def _coerce(kind: str, value: Any) -> tuple[bool, Any]:
    """Lax pydantic-like coercion of one JSON value; returns (ok, value)."""
    if kind == "any":
        return True, value
    if kind == "str":
        return isinstance(value, str), value
    if kind == "bool":
        if isinstance(value, bool):
            return True, value
        if isinstance(value, int) and value in (0, 1):
            return True, bool(value)
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return True, value.lower() in ("true", "1", "yes")
        return False, value
    if kind == "int":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, int):
            return True, value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return True, int(value)
        if isinstance(value, str):
            try:
                return True, int(value.strip())
            except ValueError:
                return False, value
        return False, value
    if kind == "number":
        if isinstance(value, bool):
            return False, value
        if isinstance(value, int | float):
            return True, float(value)
        if isinstance(value, str):
            try:
                return True, float(value.strip())
            except ValueError:
                return False, value
        return False, value
    if kind == "str_map":
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return ok, value
    if kind == "str_list":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return ok, value
    if kind == "int_list":
        ok = isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        )
        return ok, value
    raise AssertionError(kind)


def parse_json_body(raw: bytes, content_type: str | None) -> Any:
    """Decode a JSON request body the way FastAPI does, raising 422 on failure.

    A body with a non-JSON ``Content-Type`` is not parsed (the model then sees no object).
    An empty body means "no body" and is reported as a missing body by :func:`validate`.
    """
    if not raw:
        return None
    ctype = (content_type or "application/json").split(";")[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        return raw.decode("latin-1")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        pos = getattr(exc, "pos", 0)
        raise validation_error(
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", pos],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": str(getattr(exc, "msg", exc))},
                }
            ]
        ) from exc


def validate(body: Any, fields: dict[str, Field]) -> dict[str, Any]:
    """Validate a decoded body against ``fields``; returns values with defaults applied.

    Unknown keys are ignored (pydantic's default). Errors are collected like pydantic does and
    raised together as one 422.
    """
    if body is None:
        raise validation_error(
            [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
        )
    if not isinstance(body, dict):
        raise validation_error(
            [
                {
                    "type": "model_attributes_type",
                    "loc": ["body"],
                    "msg": "Input should be a valid dictionary or object to extract fields from",
                    "input": body,
                }
            ]
        )
    out: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for name, spec in fields.items():
        if name not in body:
            if spec.required:
                errors.append(
                    {
                        "type": "missing",
                        "loc": ["body", name],
                        "msg": "Field required",
                        "input": body,
                    }
                )
            out[name] = spec.default
            continue
        value = body[name]
        if value is None:
            if spec.nullable and not spec.required:
                out[name] = None
                continue
            code, msg = _MESSAGES.get(spec.kind, ("type_error", "Invalid value"))
            errors.append({"type": code, "loc": ["body", name], "msg": msg, "input": value})
            continue
        ok, coerced = _coerce(spec.kind, value)
        if ok and spec.choices is not None and coerced not in spec.choices:
            expected = " or ".join(repr(c) for c in spec.choices)
            errors.append(
                {
                    "type": "enum",
                    "loc": ["body", name],
                    "msg": f"Input should be {expected}",
                    "input": value,
                    "ctx": {"expected": expected},
                }
            )
            continue
        if not ok:
            code, msg = _MESSAGES[spec.kind]
            errors.append({"type": code, "loc": ["body", name], "msg": msg, "input": value})
            continue
        out[name] = coerced
    if errors:
        raise validation_error(errors)
    return out


_ERROR_TYPES = {
    errno_mod.ENOENT: "not_found",
    errno_mod.EACCES: "permission_denied",
    errno_mod.EPERM: "permission_denied",
    errno_mod.EISDIR: "invalid_target",
    errno_mod.ENOTDIR: "invalid_target",
    errno_mod.EEXIST: "already_exists",
    errno_mod.EROFS: "read_only_filesystem",
    errno_mod.ENOSPC: "no_space_left",
    errno_mod.ENAMETOOLONG: "invalid_path",
    errno_mod.EINVAL: "invalid_path",
}


#: Set once at start-up: ``"structured"`` (1.9.x: ``FileOperationError`` in ``data``) or
#: ``"legacy"`` (older images: ``data: null``, and HTTP 500 for a decode error).
FILE_ERRORS = {"mode": "structured"}


def file_error(path: str, operation: str, exc: BaseException, verb: str) -> dict[str, Any]:
    """Build the HTTP-200 ``success: false`` envelope with a ``FileOperationError``.

    ``verb`` forms the message prefix, e.g. ``"Failed to read file"``. In ``legacy`` mode the
    envelope carries ``data: null`` and a decode error becomes a plain-text HTTP 500.
    """
    if FILE_ERRORS["mode"] == "legacy":
        if isinstance(exc, UnicodeDecodeError):
            raise HttpError(500, "Internal Server Error")
        return envelope(None, success=False, message=f"{verb}: {exc}")
    err_no = exc.errno if isinstance(exc, OSError) else None
    if isinstance(exc, UnicodeDecodeError):
        error_type = "decode_error"
    elif err_no is not None:
        error_type = _ERROR_TYPES.get(err_no, "io_error")
    elif isinstance(exc, ValueError):
        error_type = "invalid_path"
    else:
        error_type = "io_error"
    message = f"{verb}: {exc}"
    data = {
        "path": path,
        "operation": operation,
        "message": message,
        "error_type": error_type,
        "retryable": False,
        "errno": err_no,
        "errno_name": errno_mod.errorcode.get(err_no) if err_no is not None else None,
        "exception_type": type(exc).__name__,
    }
    return envelope(data, success=False, message=message)
