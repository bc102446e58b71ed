"""Which file a ``--hardware`` spec names, found without loading the profile.

One lookup for the two that need it: ``hardware.load_profile`` reads the file it finds, and
the derived cache (tracekit.pipeline.cache) keys an analysis on that file's content. Standard
library only, so that keying a warm analysis imports neither numpy nor the measure stage.
"""

from __future__ import annotations

import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


def user_config_dir() -> Path:
    """Where `tracekit calibrate` writes profiles: $XDG_CONFIG_HOME/tracekit/hardware."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tracekit" / "hardware"


def packaged_dir() -> Traversable:
    """The packaged profiles' folder (``tracekit/measure/data``)."""
    return resources.files("tracekit.measure") / "data"


def named_profile(name: str) -> tuple[str, Traversable] | None:
    """The file of the profile called ``name``: ("user", the user's calibrated one) before
    ("packaged", the one shipped), or None when neither exists."""
    user = user_config_dir() / f"{name}.yaml"
    if user.is_file():
        return "user", user
    packaged = packaged_dir() / f"{name}.yaml"
    if packaged.is_file():
        return "packaged", packaged
    return None


def is_file_spec(spec: str | Path) -> bool:
    """Whether ``spec`` names a YAML file rather than a profile name."""
    candidate = Path(spec)
    return candidate.suffix in (".yaml", ".yml") or candidate.is_file()


__all__ = ["is_file_spec", "named_profile", "packaged_dir", "user_config_dir"]
