"""sluice: plans and schedules the training of Transformer models on variable-length sequences.

The planners are sluice's C++ library, bound with pybind11: ``plan_iteration`` dispatches a batch across the
pipelines of heterogeneous candidate strategies and packs each pipeline's micro-batches (Hydraulis), ``propose``
picks the candidates, ``Planner`` plans ahead of the trainer on worker threads. ``sluice.torch`` turns plans into
what a varlen attention kernel takes (importing it needs PyTorch; nothing else does).
"""
import atexit as _atexit
import os as _os
import weakref as _weakref

# An installed package carries the bundled profiles and length files beside it; a build tree finds them in the
# source tree instead. SLUICE_DATA_DIR, when set, wins over both.
_bundled = _os.path.join(_os.path.dirname(__file__), "data")
if _os.path.isdir(_bundled):
    _os.environ.setdefault("SLUICE_DATA_DIR", _bundled)

from ._sluice import *  # noqa: E402,F401,F403
from ._sluice import __version__, Planner as _Planner  # noqa: E402,F401

# Planner threads call back into Python for batches, so they must stop before the interpreter does.
_live_planners = _weakref.WeakSet()


class Planner(_Planner):
    __doc__ = _Planner.__doc__

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _live_planners.add(self)


@_atexit.register
def _stop_planners():
    for planner in list(_live_planners):
        planner.close()
