"""The library's one error type, in a module of its own: ``remote list`` imports the store,
which needs this and nothing else of :mod:`.protocol`."""


class RemoteError(Exception):
    """A one-line error for the operator; ``str()`` says what to do."""


class ChoiceError(RemoteError):
    """The command line asks for something the gateway cannot do as asked (no such
    agent, or no default one): a usage error (exit 2), never worth a reconnect."""
