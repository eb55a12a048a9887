// GENERATED from src/paddedcell/agent_text/tool_schemas.json by
// `python -m paddedcell.agent_text --write`; edit that file, not this one
// (tests/test_agent_text.py fails when the two differ).
// pcexec and pcprocess copy OpenClaw 2026.9.6's own `exec` and `process` schemas
// (dist/bash-tools.schemas-*.mjs) field for field, so a model that knows exec knows
// pcexec; like exec they accept and ignore unknown fields.

export const EXEC_PARAMETERS = {
  "type": "object",
  "properties": {
    "title": {
      "type": "string",
      "maxLength": 120,
      "description": "Every call: short purpose; never claim success. No secrets."
    },
    "command": {
      "type": "string",
      "description": "Shell command. Reference secrets as $(pass_mgr get KEY); their values print as ######."
    },
    "workdir": {
      "type": "string",
      "description": "Omit/empty string: default; whitespace-only invalid."
    },
    "env": {
      "type": "object",
      "additionalProperties": {
        "type": "string"
      },
      "description": "Literal overrides; no expansion. Omit to inherit."
    },
    "yieldMs": {
      "type": "number",
      "description": "Milliseconds before backgrounding; default 10000."
    },
    "background": {
      "type": "boolean",
      "description": "Background now; timeoutSeconds applies."
    },
    "timeoutSeconds": {
      "type": "number",
      "description": "Process lifetime in seconds; 0 disables."
    },
    "pty": {
      "type": "boolean",
      "description": "PTY for TTY-required CLIs/coding agents."
    },
    "elevated": {
      "type": "boolean",
      "description": "Host elevation if allowed."
    },
    "host": {
      "type": "string",
      "enum": [
        "auto",
        "sandbox",
        "gateway",
        "node"
      ],
      "description": "Omit/auto: inherit configured host."
    },
    "ask": {
      "type": "string",
      "description": "Requests stricter approvals under tools.exec.mode and host policy; channel-origin calls cannot override host ask=off."
    },
    "node": {
      "type": "string",
      "description": "Node id/name for host=node."
    }
  },
  "required": [
    "command"
  ]
};

export const PROCESS_PARAMETERS = {
  "type": "object",
  "properties": {
    "action": {
      "type": "string",
      "enum": [
        "list",
        "poll",
        "log",
        "write",
        "send-keys",
        "submit",
        "paste",
        "kill",
        "clear",
        "remove"
      ],
      "description": "Process action (list|poll|log|write|send-keys|submit|paste|kill|clear|remove)"
    },
    "sessionId": {
      "type": "string",
      "description": "Required for every action except list."
    },
    "data": {
      "type": "string",
      "description": "Data to write for write"
    },
    "keys": {
      "type": "array",
      "items": {
        "type": "string"
      },
      "description": "Key tokens to send for send-keys"
    },
    "hex": {
      "type": "array",
      "items": {
        "type": "string"
      },
      "description": "Hex bytes to send for send-keys"
    },
    "literal": {
      "type": "string",
      "description": "Literal string for send-keys"
    },
    "text": {
      "type": "string",
      "description": "Text to paste for paste"
    },
    "bracketed": {
      "type": "boolean",
      "description": "Wrap paste in bracketed mode"
    },
    "eof": {
      "type": "boolean",
      "description": "Close stdin after write"
    },
    "offset": {
      "type": "number",
      "description": "Log offset"
    },
    "limit": {
      "type": "number",
      "description": "Log length"
    },
    "timeout": {
      "type": "number",
      "minimum": 0,
      "description": "For poll: wait up to this many milliseconds before returning; max 30000 ms, higher values are clamped to 30000"
    }
  },
  "required": [
    "action"
  ]
};

export const SAFE_RESTART_PARAMETERS = {
  "type": "object",
  "properties": {
    "rollback": {
      "type": "string",
      "description": "Path of a script that undoes your change if the gateway does not come back."
    },
    "log": {
      "type": "string",
      "description": "Path of the log file for the restart job's output and status."
    }
  },
  "required": [
    "rollback",
    "log"
  ],
  "additionalProperties": false
};

export const WORKFLOW_PARAMETERS = {
  "type": "object",
  "properties": {
    "action": {
      "type": "string",
      "enum": [
        "open",
        "close"
      ],
      "description": "open: focus on this workflow (messages outside it get a busy reply); close: end it."
    },
    "workflow": {
      "type": "string",
      "description": "Short name of the workflow, e.g. release-1.4."
    }
  },
  "required": [
    "action",
    "workflow"
  ],
  "additionalProperties": false
};

export const PCEXEC_DESCRIPTION = "Run a shell command like exec, through PaddedCell. Reference secrets only as $(pass_mgr get KEY) inside the command; their values (and any secret of yours) appear as ###### in the output. Same parameters and results as exec; use pcprocess for sessions that keep running.";

export const PCPROCESS_DESCRIPTION = "Manage your pcexec sessions that are still running or recently finished: list, poll, log, write, send-keys, submit, paste, kill, clear, remove. Same parameters and results as process; output is masked like pcexec.";

export const PROCESS_ACTIONS = PROCESS_PARAMETERS.properties.action.enum;
