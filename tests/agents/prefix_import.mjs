// A package imported from an install prefix of scripts/install-agents.sh (the SDKs' and the MCP
// packages' prefixes), never from a node_modules near the script. The scripts that use it are
// copied beside it into a session's working directory (the child's /tmp is its own).
//
// importFromPrefix(VARIABLE, NAME, usage): the module NAME resolved in $VARIABLE/node_modules;
// usage(message) (which must not return) when VARIABLE is unset or the package is not there.

import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export async function importFromPrefix(variable, name, usage) {
  const dir = process.env[variable];
  if (!dir) usage(`${variable} is not set (the prefix where install-agents.sh put ${name})`);
  const require = createRequire(path.join(path.resolve(dir), 'node_modules', 'index.js'));
  let resolved;
  try {
    resolved = require.resolve(name);
  } catch {
    usage(`${name} is not installed in ${dir} (run scripts/install-agents.sh)`);
  }
  return import(pathToFileURL(resolved).href);
}
