"""The faces of leak-harness: the ``leak-harness`` command and the pytest plugin.

They sit above everything else: the engine (``harness``) and the renderers
(``reports``) never import this package, so every import arrow points down.
"""
