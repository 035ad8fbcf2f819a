"""AIO Sandbox compatible server double (see README.md); tests use :class:`AioDouble`."""

from .harness import AioDouble, AioDoubleError, AuthMode

__all__ = ["AioDouble", "AioDoubleError", "AuthMode"]
