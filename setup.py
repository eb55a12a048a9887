"""The optional C extension of the redactor (paddedcell.redactor._native).

Everything else is in pyproject.toml. ``optional=True``: without a C compiler
(or Python's headers) the install goes on without it, and the redactor runs
its pure-Python gates (the same results; see paddedcell/redactor/dumps.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "paddedcell.redactor._native",
            ["src/paddedcell/redactor/_native.c"],
            optional=True,
        )
    ]
)
