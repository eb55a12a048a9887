"""PyInstaller entry point for the pass_mgr binary (PyInstaller takes a script, not an entry point)."""

from paddedcell.cli.pass_mgr import main

main()
