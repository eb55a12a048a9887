"""Every exit code of ``pass_mgr`` (docs/design.md §4.3), in one place.

The vault's errors carry theirs (``errors.py``), the command line uses these
names; nothing else spells a number. Scripts and the plugin rely on them.
"""

OK = 0
#: Anything else: a file-system error, a busy lock, a refused value.
ERROR = 1
#: Wrong arguments (click's usage errors are 2 as well), or a bad setting in
#: config.toml or the environment (``config.ConfigError``, as in every CLI).
USAGE = 2
#: Not initialized, or locked after an admin-password leak.
NOT_READY = 3
NO_SUCH_KEY = 4
#: A wrong admin password, or a human-only command in an agent context.
FORBIDDEN = 5
#: A tampered, corrupt or rolled-back file.
INTEGRITY = 6
#: ``admin check-leak`` found the admin password.
LEAK = 10
