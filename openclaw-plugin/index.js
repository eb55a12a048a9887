// PaddedCell for OpenClaw: agents run shell commands through `pcexec` (secrets
// referenced as $(pass_mgr get KEY) come back as ######), restart the gateway
// with `safe_restart`, and every message and tool call is scanned for the
// admin password. The plugin is thin: the work happens in the paddedcell
// daemon, reached over its Unix socket (docs/design.md §4.4).

import { registerTools } from "./lib/tools.js";
import { registerHooks } from "./lib/hooks.js";
import { clientsFor } from "./lib/state.js";

export const PLUGIN_ID = "paddedcell";

export default {
  id: PLUGIN_ID,
  name: "PaddedCell",
  description: "pcexec/pcprocess with secrets masked as ######, safe_restart, exec policy and admin-password leak scan.",
  register(api) {
    // Synchronous and free of side effects: tools and hooks are registered on
    // this api; the daemon is contacted (and started) only when first needed.
    const config = api.pluginConfig ?? {};
    const { client, sync } = clientsFor(config, api.logger);
    const deps = { api, config, client, sync, logger: api.logger ?? console };
    registerTools(deps);
    registerHooks(deps);
  },
};
