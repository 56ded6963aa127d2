"""What every report renders with: HTML pieces, number formats, figures, downsampling.

- :mod:`~reports.render.html`: a self-contained page, tables, badges, escaping
- :mod:`~reports.render.numbers`: one display unit per row or axis, durations, slugs
- :mod:`~reports.render.figure`: lazy matplotlib, time axes, warm-up shading, saving
- :mod:`~reports.render.downsample`: min/max envelope, for drawing only
- :mod:`~reports.render.fitline`: the judged line as ``summary.json`` stores it, and its band
- :mod:`~reports.render.judged`: the budgets a run was judged on, and its convicting signal
- :mod:`~reports.render.growth`: a growth in words, as every report quotes it
- :mod:`~reports.render.series`: a run's time span, the collector's running total
"""
