"""The corpus on disk: one self-describing folder per bucket (``corpus``),
the user's corpus seeded from the committed one (``seed``) and re-keying an
old corpus to today's bucket ids (``rekey``)."""

__all__: list[str] = []
