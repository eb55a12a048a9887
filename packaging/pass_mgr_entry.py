"""PyInstaller entry point for the pass_mgr binary (PyInstaller takes a script, not an entry point)."""

import sys


def _use_python_finders() -> None:
    """Take PyInstaller's path finder out when its archive is empty (the onedir build,
    ``noarchive``: every module is a file under ``_internal``).

    For each directory on ``sys.path`` and in a package's ``__path__``, that finder
    (``pyimod02_importers.PyiFrozenFinder``, in Python) computes a relative path, looks
    the module up in the archive, misses, and hands over to Python's own ``FileFinder``:
    ~0.7 ms of a ~20 ms ``get``. Without it ``FileFinder`` finds the same files (the
    ``.pyc`` and extension modules under ``_internal``). The onefile build keeps its
    modules in the archive, so its finder stays; so does any layout this does not know.
    """
    importers = sys.modules.get("pyimod02_importers")
    finder = getattr(importers, "PyiFrozenFinder", None)
    archive = getattr(importers, "pyz_archive", None)
    if finder is None or getattr(archive, "toc", True):
        return
    sys.path_hooks[:] = [hook for hook in sys.path_hooks if hook != finder.path_hook]
    for path, cached in list(sys.path_importer_cache.items()):
        if isinstance(cached, finder):
            del sys.path_importer_cache[path]


_use_python_finders()

from paddedcell.cli.pass_mgr import main  # noqa: E402

main()
