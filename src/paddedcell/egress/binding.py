"""A secret's binding: the hosts its real value may travel to, and where in a request.

Set by a human (``pass_mgr set … --hosts``, ``pass_mgr bind``), kept in the agent's store
inside the entry whose value it governs (covered by the store's MAC, so an agent that can
write the file cannot widen it), carried over by ``rotate`` and ``generate --force``.

``inject`` says where the proxy swaps the session's placeholder for the value:

- ``header`` (default): any request header (inside ``Authorization: Basic`` too, decoded
  and re-encoded: git over HTTPS puts tokens there) and the request target (path, query);
- ``basic``: only inside ``Authorization: Basic`` (a password for git and registries);
- ``body``: as ``header``, and the request body (length-matched placeholders keep
  ``Content-Length``).

``plain_http`` lets the value travel over plain ``http://`` to its hosts (off: a bound host
over plain HTTP is refused, since anyone on the path would read the value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .policy import HostPattern, parse_patterns

INJECT_MODES = ("header", "basic", "body")


class BindingError(ValueError):
    """A binding that cannot be stored; ``str()`` is one line saying what to fix."""


@dataclass(frozen=True)
class Binding:
    hosts: tuple[str, ...]
    inject: str = "header"
    plain_http: bool = False

    def __post_init__(self) -> None:
        if self.inject not in INJECT_MODES:
            raise BindingError(f"--inject must be one of {', '.join(INJECT_MODES)}, "
                               f"not {self.inject!r}")
        try:
            patterns = parse_patterns(self.hosts)
        except ValueError as exc:
            raise BindingError(f"--hosts: {exc}") from None
        if not patterns:
            raise BindingError("--hosts needs at least one host (api.github.com, "
                               "*.example.com, host:port)")
        if any(p.host == "*" for p in patterns):
            raise BindingError("--hosts '*' would send the value anywhere; name the hosts")
        object.__setattr__(self, "hosts", tuple(str(p) for p in patterns))
        object.__setattr__(self, "_patterns", patterns)

    @classmethod
    def parse(cls, hosts: str, inject: str = "header", plain_http: bool = False) -> "Binding":
        """From the command line: ``--hosts a.com,*.b.com:443``."""
        return cls(tuple(h.strip() for h in hosts.split(",") if h.strip()), inject, plain_http)

    def allows(self, host: str, port: int) -> bool:
        """Whether ``host:port`` (normalized) is one of the binding's destinations."""
        patterns: tuple[HostPattern, ...] = self._patterns  # type: ignore[attr-defined]
        return any(p.matches_name(host, port) or (p.address is not None and p.host == host
                                                  and p.port in (None, port))
                   for p in patterns)

    def to_record(self) -> dict[str, Any]:
        """What the store keeps (JSON)."""
        return {"hosts": list(self.hosts), "inject": self.inject, "plain_http": self.plain_http}

    @classmethod
    def from_record(cls, record: Any) -> "Binding":
        if not isinstance(record, dict) or not isinstance(record.get("hosts"), list):
            raise BindingError("a stored binding is damaged; bind the key again")
        return cls(tuple(str(h) for h in record["hosts"]), str(record.get("inject", "header")),
                   bool(record.get("plain_http", False)))

    def describe(self) -> str:
        """One line for ``pass_mgr list`` and ``admin status``: hosts and options, no value."""
        extra = "" if self.inject == "header" else f" inject={self.inject}"
        extra += " plain-http" if self.plain_http else ""
        return ",".join(self.hosts) + extra


def describe_record(record: Any) -> str:
    """``describe()`` of a stored record; a damaged one says so instead of failing a list."""
    try:
        return Binding.from_record(record).describe()
    except BindingError:
        return "(damaged binding: bind the key again)"


def list_line(key: str, record: Any | None) -> str:
    """One line of ``pass_mgr list``: the key, and a tab and its hosts when it is bound."""
    return key if record is None else f"{key}\t{describe_record(record)}"
