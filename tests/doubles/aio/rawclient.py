"""``RawClient``: a thin ``requests`` wrapper bound to an :class:`AioDouble` (for tests)."""

from __future__ import annotations

from typing import Any

import requests

from .harness import AioDouble


class RawClient:
    """A thin ``requests`` wrapper bound to a double (JSON helpers with timeouts)."""

    def __init__(self, aio: AioDouble) -> None:
        self.aio = aio
        self.http = requests.Session()
        self.http.headers.update(aio.headers)

    def post(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        kw.setdefault("timeout", 30)
        return self.http.post(self.aio.url + path, json=body, **kw)

    def get(self, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("timeout", 30)
        return self.http.get(self.aio.url + path, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        kw.setdefault("timeout", 30)
        return self.http.delete(self.aio.url + path, **kw)

    def ok(self, path: str, body: Any = None) -> dict[str, Any]:
        """POST and return ``data`` of a 200 ``success: true`` envelope."""
        response = self.post(path, body)
        assert response.status_code == 200, response.text
        payload = response.json()
        assert payload["success"] is True, payload
        data: dict[str, Any] = payload["data"]
        return data

    def close(self) -> None:
        self.http.close()
