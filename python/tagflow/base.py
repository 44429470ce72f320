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

#: The class MXNet's tutorials catch (``except mx.MXNetError``): every error
#: tagflow raises derives from it.
MXNetError = Error
