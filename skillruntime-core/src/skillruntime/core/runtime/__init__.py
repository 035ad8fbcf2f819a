"""The SkillRuntime SPI and its base classes, sync (``spi``) and async (``async_spi``) side by side.

The package also holds what every runtime shares: the preparation and environment rules
(``rules``), conversation workspaces and path scoping (``workspace``), the scoped file systems
(``scoped``, generated from ``async_scoped``), one value per event loop (``loop_local``), the
sync/async bridges (``bridge``), bounded output buffers (``output``) and the closing protocol
(``closing``). The names of the former ``skillruntime.core.runtime`` module are served from here
(lazily, from ``spi``).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .spi import (
        BOOTSTRAP_OUTPUT_TAIL,
        BaseSkillRuntime,
        PreparedSkill,
        SkillRuntime,
        ready_marker_path,
        run_bootstrap,
    )

__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "BOOTSTRAP_OUTPUT_TAIL": ".spi",
        "BaseSkillRuntime": ".spi",
        "PreparedSkill": ".spi",
        "SkillRuntime": ".spi",
        "ready_marker_path": ".spi",
        "run_bootstrap": ".spi",
    },
)

__all__ = [
    "BOOTSTRAP_OUTPUT_TAIL",
    "BaseSkillRuntime",
    "PreparedSkill",
    "SkillRuntime",
    "ready_marker_path",
    "run_bootstrap",
]
