# Sourced by scripts/dev and scripts/test (after _venv.sh, at the repository root): install the MCP servers the
# demo agents and tests run over stdio (package.json) with `npm ci` when node_modules is missing or
# package-lock.json changed, as _venv.sh does for .venv. Without npm, the files demo agent reports its MCP server
# unreachable and the MCP tests fail saying to run npm ci.
npm_stamp=node_modules/.package-lock.sha256
npm_wanted=$(sha256sum package-lock.json | cut -d ' ' -f 1)
if [ "$(cat "$npm_stamp" 2>/dev/null || true)" != "$npm_wanted" ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "Installing package-lock.json into node_modules"
    npm ci --silent --no-audit --no-fund
    echo "$npm_wanted" > "$npm_stamp"
  else
    echo "warning: npm was not found; the MCP servers of package.json are not installed (run npm ci)." >&2
  fi
fi
