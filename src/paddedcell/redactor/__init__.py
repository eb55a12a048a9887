"""Streaming redaction of known secrets: secrets in, bytes in, bytes out; no I/O.

The guarantee: no secret byte, nor an enabled encoded variant of a secret,
reaches the output under any chunking of the input. See
:class:`~paddedcell.redactor.stream.StreamRedactor`.
"""

from .filters import OutputFilter, Passthrough, filter_options, new_filter
from .stream import RedactorStateError, ShortSecretWarning, StreamRedactor, redact
from .variants import Variants

__all__ = ["StreamRedactor", "redact", "Variants", "ShortSecretWarning", "RedactorStateError",
           "OutputFilter", "Passthrough", "new_filter", "filter_options"]
