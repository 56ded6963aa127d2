"""One module per ``leak-harness`` subcommand beyond ``run`` and ``list``.

These are the top layer: the only harness modules that call ``reports`` (always
lazily, inside ``run``), so nothing on the measuring path imports matplotlib.
"""
