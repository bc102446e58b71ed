"""Capture: run a torch program (or ask a live server) under torch.profiler, then analyse.

* :func:`profile` - a context manager for those who mark the profiled region themselves.
* ``tracekit.capture.torch`` - ``tracekit capture -- COMMAND``: profiles every rank of an
  unchanged program through an injected ``sitecustomize`` (``tracekit/capture/hook``).
* ``tracekit.capture.server`` - ``tracekit capture --server URL``: SGLang/vLLM ``/start_profile``.
"""

from __future__ import annotations

from tracekit.capture.profiling import profile

__all__ = ["profile"]
