"""The corpus as a regression suite and the toolchain as an input:
``replay``, ``bump`` (and its ``bumpreport``), ``bisect``, the support
``matrix``, toolchain environments (``toolchains``, over ``pins``: the pin
syntax, pin files and releases, and ``installer``: what uv needs from pip's
settings) and ``--toolchain PATH`` (``toolchain_path``)."""

__all__: list[str] = []
