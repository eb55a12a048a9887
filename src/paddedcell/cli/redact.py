"""``paddedcell redact``: stdin to stdout with known secrets masked, as a stream.

Reads with ``os.read`` (returns whatever the pipe holds, no line buffering) and
writes each redacted piece with ``os.write`` at once, so output appears as soon
as it can no longer be part of a secret.
"""

from __future__ import annotations

import errno
import os
import sys
import warnings

import click

from .. import config

READ_SIZE = 64 * 1024


def _read_secrets_file(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise click.ClickException(f"cannot read secrets file {path}: {exc.strerror}; check the path")
    lines = raw.split(b"\n")
    return [line[:-1] if line.endswith(b"\r") else line for line in lines if line.strip(b"\r")]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


@click.command()
@click.option("--secrets-file", "secrets_files", multiple=True, type=click.Path(dir_okay=False),
              help="File with one secret per line (repeatable).")
@click.option("--secret", "secrets", multiple=True,
              help="A secret to mask (repeatable). Other processes can read argv: "
                   "prefer --secrets-file.")
@click.option("--mask", default=None, help="Replacement text [default: setting redactor.mask].")
@click.option("--no-variants", is_flag=True,
              help="Mask only the secrets verbatim, not their base64/hex/URL/JSON/CRLF forms "
                   "nor the pattern forms (any whitespace run, wrapped base64/hex, per-byte %XX, "
                   "colour escapes inside a secret).")
def redact(secrets_files: tuple[str, ...], secrets: tuple[str, ...], mask: str | None,
           no_variants: bool) -> None:
    """Copy stdin to stdout with the given secrets masked, streaming.

    Bytes are written as soon as they cannot be the start of a secret; only a
    tail that may still become one is held until more input (or EOF) arrives.
    """
    # Imported here: Hyperscan and pyahocorasick would slow every other
    # `paddedcell` subcommand's start-up.
    from ..redactor import ShortSecretWarning, new_filter

    settings = config.load()
    values: list[bytes] = [os.fsencode(s) for s in secrets]
    for path in secrets_files:
        values.extend(_read_secrets_file(path))
    overrides: dict = {"warn_below_length": int(settings["redactor.warn_below_length"])}
    if mask is not None:
        overrides["mask"] = mask
    if no_variants:
        overrides["variants"] = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ShortSecretWarning)
        try:
            redactor = new_filter(values, settings, **overrides)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    for w in caught:
        click.echo(f"paddedcell redact: warning: {w.message}", err=True)
    if not values:
        click.echo("paddedcell redact: warning: no secrets given; output passes unchanged", err=True)

    infd, outfd = sys.stdin.fileno(), sys.stdout.fileno()
    try:
        while True:
            try:
                data = os.read(infd, READ_SIZE)
            except InterruptedError:
                continue
            if not data:
                break
            out = redactor.feed(data)
            if out:
                _write_all(outfd, out)
        _write_all(outfd, redactor.flush())
    except BrokenPipeError:
        pass  # the reader went away; nothing left to protect
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise click.ClickException(f"I/O error: {exc.strerror}")
