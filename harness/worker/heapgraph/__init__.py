"""The heap graph: what the samplers that walk live objects share.

:mod:`.census` counts objects by type, :mod:`.roots` says where a chain of
references may start, :mod:`.search` walks back from objects to those roots,
:mod:`.naming` and :mod:`.paths` print the chains, :mod:`.cycles` explains
cyclic garbage, and :mod:`.tensor_views` groups tensors by storage for the
``tensor_pinned`` signal and the owner report; :mod:`.module_holders` names the
module-level container an allocation window's site fills. Nothing here writes samples or
imports torch; the samplers decide when to walk and what to write.
"""
