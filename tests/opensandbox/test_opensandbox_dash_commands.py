"""A command that starts with ``-`` is a command, not the sandbox shell's options: the wrapper
runs ``<shell> -c -- COMMAND`` (``bash -c --version`` printed bash's version and exited 0),
with and without ``setsid`` in the image."""

from __future__ import annotations

import uuid

import pytest

from doubles.opensandbox import OpenSandboxDouble
from skillruntime.core.models import SkillExecutionRequest
from skillruntime.opensandbox import OpenSandboxSkillRuntime


@pytest.mark.parametrize("setsid", [True, False], ids=["setsid", "no-setsid"])
def test_a_command_starting_with_a_dash_runs_as_a_command(
    opensandbox_double: OpenSandboxDouble, setsid: bool
) -> None:
    image = f"dash-{uuid.uuid4().hex[:8]}:1"
    opensandbox_double.set_image_profile(image, missing_tools=[] if setsid else ["setsid"])
    with OpenSandboxSkillRuntime(
        domain=opensandbox_double.domain, api_key=opensandbox_double.api_key, image=image
    ) as runtime:
        result = runtime.execute(SkillExecutionRequest(command="--version", timeout_seconds=20))
        assert result.exit_code == 127
        assert "--version" in result.stderr
        assert "not found" in result.stderr
        assert "GNU bash" not in result.stdout
        echoed = runtime.execute(SkillExecutionRequest(command="-x 2>/dev/null; echo after"))
        assert echoed.stdout == "after\n"
