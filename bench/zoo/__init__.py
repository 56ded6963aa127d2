"""The leak zoo: caches that leak (or only seem to) in known ways at known rates.

Each target is the plain ``RadixCache`` with one site changed (``targets.py``
lists them: kind, site, default rate), usable as a ``--target`` of any
radix scenario. A paced leak retains, at its site, whatever keeps its total at
``rate * elapsed`` and books it exactly (``ledger.py``); the gauge
``zoo_ledger_bytes`` is that truth, which ``bench/sensitivity.py`` sets
against the harness's estimate.
"""
