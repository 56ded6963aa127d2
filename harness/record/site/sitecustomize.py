"""Run by Python at start-up when ``leak-harness record`` puts this folder on PYTHONPATH.

It starts the recorder when the environment asks for one, then runs the
``sitecustomize`` this one shadows, if there is one further down the path.
Nothing here may break the program: a failure to record is written to the
recording's folder and the program runs on.
"""

try:
    from harness.record.bootstrap import chain_sitecustomize, start_from_environment
except Exception:  # the harness is not importable by this interpreter: run unrecorded
    pass
else:
    start_from_environment()
    chain_sitecustomize(__file__)
