"""What one session's proxy knows about its agent's bound secrets (held outside the sandbox).

A :class:`ProxySession` is made by the supervisor for a session with egress on. It holds:

- the agent's bindings (key → :class:`~.binding.Binding`), read when the session starts;
- the placeholders it has handed out (``issue``, called when the session's ``pass_mgr get``
  of a bound key is answered over the channel), each with its real value — in this
  process's memory only;
- the session CA (:mod:`.ca`; it may mint for any host, see ``__init__``) whose bundle the
  session's clients trust, and the context that verifies upstream servers;
- the masks for responses (the store's values and the placeholders), and the audit hook.

The proxy asks it: intercept this CONNECT target? (a binding names it); which grants may a
request carry? (:mod:`.substitute`); how to filter a response body?
"""

from __future__ import annotations

import os
import ssl
from typing import Any, Callable

from . import egress_wanted
from .binding import Binding
from .ca import CertificateAuthority, bundle_text
from .placeholders import make_placeholder
from .substitute import Grant

#: The variables that name the session's CA bundle, for the clients that read each.
CA_BUNDLE_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                       "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "DENO_CERT")

Audit = Callable[..., None]


def ca_environment(bundle_path: str) -> dict[str, str]:
    """The session environment's CA variables, all naming ``bundle_path``."""
    return {name: bundle_path for name in CA_BUNDLE_VARIABLES}



class ProxySession:
    """See the module docstring. ``mask_values`` are the store's values (masked in
    responses, as the session's output masks them); ``new_mask(values)`` builds the
    output filter (``redactor.filters.new_filter`` under the session's settings; default:
    a redactor with the default options); ``upstream_cafile`` adds a CA that upstream
    servers may be signed by (tests only: ``egress.extra_upstream_ca_file``)."""

    def __init__(self, agent_id: str | None, bindings: dict[str, Binding], *,
                 mask_values: list[str] | tuple[str, ...] = (),
                 new_mask: Callable[[list[str]], Any] | None = None,
                 audit: Audit | None = None, upstream_cafile: str | None = None):
        self.agent_id = agent_id
        self.bindings = dict(bindings)
        self._grants: dict[tuple[str, str], Grant] = {}
        self._mask_values = [v for v in mask_values if v]
        self._new_mask = new_mask
        self._redactor: Any = None
        self.audit_sink = audit
        # Not name-constrained: once the session holds a placeholder, every host's TLS is
        # terminated (to refuse a placeholder sent there), so the CA vouches for any name.
        self.ca = CertificateAuthority("PaddedCell session CA")
        self._upstream_cafile = upstream_cafile
        self._upstream_context: ssl.SSLContext | None = None

    # -- placeholders -----------------------------------------------------------------

    def issue(self, key: str, value: str) -> str:
        """The session's placeholder for bound ``key`` whose value (any version) is
        ``value``: drawn on first use, then the same for the rest of the session; never
        equal to a value of the store. PlaceholderError when the value is too short to
        shape one."""
        binding = self.bindings[key]
        grant = self._grants.get((key, value))
        if grant is not None:
            return grant.placeholder.decode()
        taken = set(self._mask_values) | {g.placeholder.decode() for g in self._grants.values()}
        placeholder = make_placeholder(value, taken)
        self._grants[(key, value)] = Grant(key, placeholder.encode(), value.encode(), binding)
        self._redactor = None  # the next response mask includes the new placeholder
        return placeholder

    @property
    def handed(self) -> bool:
        """Whether the session holds any placeholder (then no tunnel is blind)."""
        return bool(self._grants)

    def is_bound(self, key: str) -> bool:
        return key in self.bindings

    def grants(self) -> tuple[Grant, ...]:
        return tuple(self._grants.values())

    @property
    def placeholders(self) -> list[str]:
        return [g.placeholder.decode() for g in self._grants.values()]

    # -- what the proxy asks ---------------------------------------------------------------

    def intercepts(self, host: str, port: int) -> bool:
        """Whether a CONNECT to ``host:port`` is terminated here (a binding names it)."""
        return any(b.allows(host, port) for b in self.bindings.values())

    def audit(self, event: str, **fields: Any) -> None:
        if self.audit_sink is not None:
            self.audit_sink(event, agentId=self.agent_id, **fields)

    def response_filter(self) -> Any:
        """A fresh stream that masks the store's values and the placeholders (an echo
        endpoint shows ``######``, as the command's output would)."""
        values = self._mask_values + [g.value.decode() for g in self._grants.values()] \
            + self.placeholders  # the values again: a session may mask only the bound ones
        if not values:
            return None
        if self._redactor is None:
            unique = sorted(set(values), key=len, reverse=True)
            if self._new_mask is not None:
                self._redactor = self._new_mask(unique)
            else:
                from ..redactor import StreamRedactor

                self._redactor = StreamRedactor(unique)
        return self._redactor.fresh()

    def upstream_context(self) -> ssl.SSLContext:
        """Verifies upstream servers against the system's trust (plus the test CA), for
        HTTP/1.1: built once per session."""
        if self._upstream_context is None:
            context = ssl.create_default_context()
            if self._upstream_cafile:
                context.load_verify_locations(self._upstream_cafile)
            context.set_alpn_protocols(["http/1.1"])
            self._upstream_context = context
        return self._upstream_context

    def bundle(self, system_bundle: str | None = None) -> bytes:
        """System trust + the session CA: the file the CA variables name."""
        return bundle_text(self.ca.certificate_pem, system_bundle)

    def write_bundle(self, path: str) -> None:
        """:meth:`bundle` into a new file (0644: public certificates, read by the agent's
        uid). A new name, not a rewrite: truncating a file forces ext4 to flush it."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.fchmod(fd, 0o644)  # whatever the umask
            view = memoryview(self.bundle())
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)



def session_for(agent_id: str | None, settings, *, values: list[str],
                bindings: dict[str, Any], audit: Audit | None = None) -> ProxySession | None:
    """The ProxySession for a new session of this agent, or None when egress is off for
    it: ``egress.mode`` "off", or "auto" and the agent has no bound secret. ``values`` and
    ``bindings`` come from one read of its store (``vault.agent_values_and_bindings``)."""
    if not egress_wanted(settings, bindings):
        return None
    from ..redactor.filters import new_filter

    return ProxySession(agent_id, {k: Binding.from_record(r) for k, r in bindings.items()},
                        mask_values=values, new_mask=lambda v: new_filter(v, settings),
                        audit=audit,
                        upstream_cafile=settings["egress.extra_upstream_ca_file"] or None)
