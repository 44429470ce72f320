"""The engine's configuration, read once from the environment."""

from ._core import waitall  # noqa: F401
from ._core.engine import device_status, kind  # noqa: F401
