"""What uv needs from this machine to build a toolchain environment the way
pip would: the uv binary itself, pip's index, find-links, constraints and
certificate as uv flags and environment (uv does not read pip's
configuration, and the find-links folder is what keeps torch on the local CPU
wheel instead of a multi-GB CUDA build), and, for an installed wheel rather
than a checkout, the wheel's own dependencies. ``fuzz.regress.toolchains``
runs uv with these.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fuzz.regress.pins import ToolchainError

__all__ = ["uv_bin", "pip_config", "pip_settings", "uv_environ", "wheel_requirements"]


def wheel_requirements() -> list[str]:
    """dlrm-fuzz's own dependencies (no extras), as the installed wheel declares them."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        declared = requires("dlrm-fuzz") or []
    except PackageNotFoundError:
        raise ToolchainError("dlrm-fuzz: neither a source checkout nor an installed "
                             "distribution; install it with `pip install -e .`") from None
    return [req for req in declared if "extra ==" not in req.replace('"', "").replace("'", "")]


def uv_bin() -> str:
    """The uv binary: on PATH, beside this Python, or the ``uv`` package's."""
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if found:
        return found
    try:
        import uv as uv_package  # the `uv` PyPI package ships the binary
        return str(uv_package.find_uv_bin())
    except (ImportError, FileNotFoundError):
        raise ToolchainError("uv: not found; install it with `pip install uv`") from None


def pip_config() -> dict[str, str]:
    """pip's effective settings (``pip config list``: files and PIP_* variables)."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    settings: dict[str, str] = {}
    for line in done.stdout.splitlines():
        match = re.fullmatch(r"[^.]*\.([a-z-]+)='(.*)'", line.strip())
        if match:  # later lines (environment) win, as in pip
            settings[match.group(1)] = match.group(2)
    return settings


def pip_settings() -> list[str]:
    """pip's index, find-links and constraints as uv flags: uv does not read
    pip's configuration, and the find-links folder is where the CPU torch is."""
    config = pip_config()
    flags: list[str] = []
    if "index-url" in config:
        flags += ["--index-url", config["index-url"]]
    for option in ("extra-index-url", "find-links", "constraint"):
        for value in config.get(option, "").split():
            flags += [f"--{option}", value]
    return flags


def uv_environ() -> dict[str, str]:
    """This process's environment for uv, with pip's certificate where pip has one."""
    env = dict(os.environ)
    cert = pip_config().get("cert")
    if cert and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = cert
    return env
