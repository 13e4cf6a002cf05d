"""The corpus as a regression suite and the toolchain as an input:
``replay``, ``bump`` (and its ``bumpreport``), ``bisect``, the support
``matrix``, toolchain environments (``toolchains``) and ``--toolchain PATH``
(``toolchain_path``)."""

__all__: list[str] = []
