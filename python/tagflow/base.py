"""The errors tagflow raises, under the names MXNet's code uses."""

from ._core import (  # noqa: F401
    CommunicationError,
    DeviceError,
    Error,
    FileError,
    ForkError,
    NotComputedError,
    OperationError,
    OutOfMemoryError,
    StaleVariableError,
    WaitInsideOperationError,
)

#: MXNet's base error class: every tagflow error derives from it.
MXNetError = Error
