"""The AIO runtime's HTTP pools share one default TLS context per process
(:mod:`skillruntime.core.runtime.tls`).

Each pool used to load certifi's CA bundle (~50 ms of CPU): one per sync runtime object and one
per event loop of an async one, whether the service was reached over TLS or not.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid

import httpx

from doubles.aio import AioDouble
from skillruntime.aio import AioSandboxSkillRuntime, AsyncAioSkillRuntime
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.core.runtime import tls

ROOT = "/home/gem/workspace/conversations"
HI = SkillExecutionRequest(command="echo hi")


def _options(double: AioDouble) -> dict[str, str]:
    return {
        "base_url": double.url,
        "token": double.token,
        "conversation_id": f"tls-{uuid.uuid4().hex[:8]}",
        "conversations_root": ROOT,
    }


def test_sync_and_async_runtimes_on_several_loops_share_one_tls_context(
    aio_bash: AioDouble, default_contexts: list[ssl.SSLContext]
) -> None:
    for _ in range(2):
        with AioSandboxSkillRuntime(**_options(aio_bash)) as runtime:
            assert runtime.execute(HI).stdout == "hi\n"

    async def use(runtime: AsyncAioSkillRuntime) -> None:
        assert (await runtime.execute(HI)).stdout == "hi\n"

    runtime = AsyncAioSkillRuntime(**_options(aio_bash))
    asyncio.run(use(runtime))  # one event loop ...
    asyncio.run(use(runtime))  # ... then another, each with its own connection pool
    asyncio.run(runtime.close())
    assert len(default_contexts) == 1
    assert default_contexts[0] is tls.shared_ssl_context(httpx.create_ssl_context)
