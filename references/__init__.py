"""Reference implementations that the tests and benchmarks compare the library against.

Not part of the library (``pip install`` leaves them out): each module rebuilds a peer's
model from that peer's own package, e.g. the d2l book's Bahdanau decoder in
:mod:`references.d2l_bahdanau`. Importable from the repository's root, where
``python -m pytest`` and ``python -m bench.<name>`` run.
"""
