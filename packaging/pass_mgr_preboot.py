"""Runs before PyInstaller's bootstrap script (pass_mgr.spec puts it there).

The bootstrap's ctypes hook (``pyimod03_ctypes``) imports ctypes at every start to wrap
its loaders. The spec leaves ctypes out, so that import fails, but only after a search
of every path entry through PyInstaller's finders: ~0.4 ms of a ~20 ms ``get``. Marked
absent here, it fails at once; nothing in pass_mgr imports ctypes.
"""

import sys

sys.modules.setdefault("ctypes", None)
