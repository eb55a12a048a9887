"""PaddedCell: agents use secrets without seeing them, and restart safely."""

__version__ = "0.1.0"

#: Any of these set means "an agent's environment" (docs/design.md §4.3 agent context).
AGENT_CONTEXT_VARIABLES = ("AGENT", "AGENT_ID", "AGENT_WORKSPACE", "PADDEDCELL_AGENT",
                           "OPENCLAW_SHELL")
